"""PubMed/MEDLINE XML (``PubmedArticleSet``, the baseline and update files), one record per article.

A record is a ``PubmedArticle``: its ID is the ``PMID``, its text ``title + " " + abstract``
(the abstract's sections joined by spaces, inline markup such as ``<i>`` kept as text; the
title alone when there is no abstract), as for PubTator, and its meta the title. The file is
fed to the parser line by line, so a record's ``where`` is the line of its
``<PubmedArticle>``; an article without a PMID is one malformed record, and XML that breaks
off (a truncated download) is a malformed record at the line where it broke, after which
the file ends. External DTDs are never fetched. ``DeleteCitation`` entries of update files
are not documents and are passed over.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

ARTICLE = "PubmedArticle"


def article_text(article: ET.Element) -> Optional[tuple]:
    """(PMID, title, text) of a ``PubmedArticle`` element, or None without a PMID."""
    pmid = article.findtext("MedlineCitation/PMID")
    if not pmid or not pmid.strip():
        return None
    node = article.find("MedlineCitation/Article/ArticleTitle")
    title = " ".join("".join(node.itertext()).split()) if node is not None else ""
    sections = [" ".join("".join(part.itertext()).split())
                for part in article.findall("MedlineCitation/Article/Abstract/AbstractText")]
    abstract = " ".join(s for s in sections if s)
    return pmid.strip(), title, f"{title} {abstract}" if abstract else title


def read_articles(path: Path, lines: Iterator[tuple], record: Callable[..., Any],
                  malformed: Callable[..., Any]) -> Iterator[Any]:
    """Records of the PubMed XML whose ``(number, text, problem, offset)`` lines are ``lines``.

    ``record(ordinal, pmid, text, where, title, line)`` and ``malformed(ordinal, where, reason)``
    build the reader's items, so this module knows XML only.
    """
    parser = ET.XMLPullParser(events=("start", "end"))
    ordinal, start_line, depth, root = 0, 0, 0, None
    problems: dict = {}
    for number, text, problem, _ in lines:
        if problem:
            problems[number] = problem
        try:
            parser.feed(text + "\n")
            events = list(parser.read_events())
        except ET.ParseError as err:
            yield malformed(ordinal, f"{path}:{err.position[0] if err.position else number}",
                            f"invalid XML ({err}); the rest of the file cannot be read")
            return
        for event, element in events:
            if event == "start":
                root = element if root is None else root
                depth += 1
                if element.tag == ARTICLE and depth == 2:
                    start_line = number
                continue
            depth -= 1
            if element.tag != ARTICLE or depth != 1:
                continue
            where = f"{path}:{start_line}"
            found = article_text(element)
            undecodable = [f"line {n}: {p}" for n, p in sorted(problems.items()) if n >= start_line]
            problems.clear()
            if undecodable:
                yield malformed(ordinal, where, "; ".join(undecodable))
            elif found is None:
                yield malformed(ordinal, where, "a PubmedArticle without a PMID")
            else:
                yield record(ordinal, found[0], found[2], where, found[1], start_line)
            ordinal += 1
            root.clear()  # keep memory flat: articles already read are dropped
    try:
        parser.close()
    except ET.ParseError as err:
        yield malformed(ordinal, f"{path}:{err.position[0] if err.position else 0}",
                        f"invalid XML: the file ends inside an element ({err})")


__all__ = ["article_text", "read_articles"]
