"""scispaCy's rule-based tokenizer as a registered spaCy tokenizer.

The project's NER model is trained on text cut by scispaCy's ``combined_rule_tokenizer`` so
that its token offsets match scispaCy's own pipelines (a user can swap one for the other and
get the same spans). A pipeline trained that way names this function in its config
(``[nlp.tokenizer] @tokenizers = "sapbert.ScispacyTokenizer.v1"``); it lives in the runtime
package and is registered through the ``spacy_tokenizers`` entry point, so ``spacy.load`` of the
packaged pipeline works with only ``spacy-sapbert`` installed and without importing this module.
"""
from __future__ import annotations

import re
import warnings
from types import FunctionType, SimpleNamespace
from typing import Any, Callable, Iterable

from spacy.language import Language
from spacy.tokenizer import Tokenizer
from spacy.util import registry

TOKENIZER_NAME = "sapbert.ScispacyTokenizer.v1"
HYPHEN_INFIX = r"(?<=[A-Za-z0-9])[-/](?=[A-Za-z])"
SHORT_FORM_PREFIXES = (
    r"\((?=(?![RSEZDLrsezdl0-9,+\-±]+\))[^()\s]{2,12}\)-[A-Za-z])",  # the "(" of "(NTG)-induced", not of "(S)-ketamine"
    r"[^()\s]{2,12}(?=\)-[A-Za-z])",  # then "NTG" (scispaCy's prefixes cut the ")" after it)
    r"-(?=[a-z])",  # and the hyphen of the "-induced" left
)
"""Prefix rules, tried before scispaCy's, that cut a short form in parentheses off the hyphenated word it is glued to:
"nitroglycerin (NTG)-induced" → "nitroglycerin", "(", "NTG", ")", "-", "induced". scispaCy keeps a token "(X)-word"
whole so that stereo descriptors stay on their chemical ("(S)-ketamine", "(-)-baclofen", "(2R,3S)-…"), and those stay:
a parenthesis holding only R, S, E, Z, D, L, digits, commas and signs is no short form here."""


class ScispacyTokenizer(Tokenizer):
    """spaCy's ``Tokenizer`` with scispaCy's rules, which does not load a saved state equal to its own.

    ``spacy.load`` builds the tokenizer from the config and then reads the saved one over it, which
    loads its ~1,400 special cases again (0.1-0.2 s of the default pipeline's load, for the state the
    factory had just built). Saved bytes equal to this tokenizer's own are skipped; any other saved
    state (a user's added special cases, another spaCy's serialisation) is read as spaCy reads it.
    """

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> "ScispacyTokenizer":
        if bytes_data == self.to_bytes(exclude=exclude):
            return self
        return super().from_bytes(bytes_data, exclude=exclude)


@registry.tokenizers(TOKENIZER_NAME)
def create_scispacy_tokenizer(split_hyphens: bool = False) -> Callable[[Language], Tokenizer]:
    """Return the factory spaCy calls with the ``nlp`` object to build its tokenizer.

    ``split_hyphens=False`` is scispaCy's tokenizer unchanged. ``True`` also cuts a hyphen or
    slash between a letter or digit and a letter ("cocaine-induced" -> "cocaine", "-", "induced"),
    as the tokenised releases of BC5CDR and NCBI do: about 16% of BC5CDR's chemical mentions
    end at such a hyphen and are out of reach of scispaCy's tokenisation. It also cuts a short form
    in parentheses off the hyphenated word after it (:data:`SHORT_FORM_PREFIXES`: "(NTG)-induced", 20
    tokens of BC5CDR dev), so the NER and the abbreviation detector see the short form. A pipeline
    saved before that rule keeps the rules it saved (spaCy reads them over the factory's).
    """

    def make_tokenizer(nlp: Language) -> Tokenizer:
        # Imported here: scispacy pulls in heavier modules that a pipeline without this
        # tokenizer never needs.
        from scispacy.custom_tokenizer import combined_rule_tokenizer

        # combined_rule_tokenizer copies token_match from nlp.tokenizer, which does not exist yet
        # while spaCy is still building the pipeline. spaCy's default tokenizer would take it from
        # the language defaults: hand over just that, not a whole tokenizer built and thrown away
        # (its ~1,400 special cases took a fifth of the default pipeline's load time).
        # It is also built without the language's ~1,400 exceptions, which are added once at the end:
        # each affix set on a tokenizer loads all its special cases again.
        bare = SimpleNamespace(vocab=nlp.vocab, Defaults=SimpleNamespace(tokenizer_exceptions={}),
                               tokenizer=SimpleNamespace(token_match=nlp.Defaults.token_match))
        build = _with_hyphen_rules(combined_rule_tokenizer) if split_hyphens else combined_rule_tokenizer
        with warnings.catch_warnings():
            # scispaCy's character classes trip a harmless "possible set union" FutureWarning.
            warnings.simplefilter("ignore", FutureWarning)
            tokenizer = build(bare)
        infix_finditer, prefix_search = tokenizer.infix_finditer, tokenizer.prefix_search
        pattern = infix_finditer.__self__.pattern  # type: ignore[attr-defined]
        if split_hyphens and not pattern.endswith(f"|{HYPHEN_INFIX}"):  # a scispaCy that compiles otherwise
            infix_finditer = re.compile(f"{pattern}|{HYPHEN_INFIX}").finditer
        prefixes = prefix_search.__self__.pattern  # type: ignore[attr-defined]
        if split_hyphens and not prefixes.startswith(_SHORT_FORM_PATTERN):
            prefix_search = re.compile(f"{_SHORT_FORM_PATTERN}|{prefixes}").search
        kept = ScispacyTokenizer(nlp.vocab, prefix_search=prefix_search,
                                 suffix_search=tokenizer.suffix_search, infix_finditer=infix_finditer,
                                 token_match=tokenizer.token_match, url_match=tokenizer.url_match)
        # scispaCy's own order: the language's exceptions, then its abbreviations over them; set last,
        # so that the special cases load once (each affix set after them loads them all again)
        kept.rules = {**nlp.Defaults.tokenizer_exceptions, **tokenizer.rules}
        return kept

    return make_tokenizer


_SHORT_FORM_PATTERN = "|".join(f"^{rule}" for rule in SHORT_FORM_PREFIXES)  # as spaCy's compile_prefix_regex joins


def _with_hyphen_rules(combined_rule_tokenizer: Callable[[Any], Tokenizer]) -> Callable[[Any], Tokenizer]:
    """scispaCy's ``combined_rule_tokenizer`` whose infix regex also has :data:`HYPHEN_INFIX` as its last
    alternative and whose prefix regex has :data:`SHORT_FORM_PREFIXES` first: the same function run with
    compilers that add them, so the ~15,000-character infix pattern is compiled once (compiling scispaCy's
    and then the extended one again took ~40 ms of every load of the default). A copy of the function with
    its own globals: scispaCy's module is not changed, for this or any other thread. (A scispaCy that no
    longer compiles its affixes through those names gets them added after, as before.)"""
    from spacy.util import compile_infix_regex, compile_prefix_regex

    def infixes_and_hyphen(entries: Iterable[str]) -> re.Pattern:
        return compile_infix_regex([*entries, HYPHEN_INFIX])

    def short_forms_and_prefixes(entries: Iterable[str]) -> re.Pattern:
        return compile_prefix_regex([*SHORT_FORM_PREFIXES, *entries])

    function = combined_rule_tokenizer
    namespace = {**function.__globals__, "compile_infix_regex": infixes_and_hyphen,
                 "compile_prefix_regex": short_forms_and_prefixes}
    return FunctionType(function.__code__, namespace, function.__name__, function.__defaults__, function.__closure__)


def scispacy_blank(lang: str = "en", split_hyphens: bool = False) -> Language:
    """A blank pipeline with scispaCy's tokenizer: what the NER corpora are tokenised with."""
    import spacy

    config = {"nlp": {"tokenizer": {"@tokenizers": TOKENIZER_NAME, "split_hyphens": split_hyphens}}}
    return spacy.blank(lang, config=config)
