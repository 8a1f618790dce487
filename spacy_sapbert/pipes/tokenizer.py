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
    end at such a hyphen and are out of reach of scispaCy's tokenisation.
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
        build = _with_hyphen_infix(combined_rule_tokenizer) if split_hyphens else combined_rule_tokenizer
        with warnings.catch_warnings():
            # scispaCy's character classes trip a harmless "possible set union" FutureWarning.
            warnings.simplefilter("ignore", FutureWarning)
            tokenizer = build(bare)
        infix_finditer = tokenizer.infix_finditer
        pattern = infix_finditer.__self__.pattern  # type: ignore[attr-defined]
        if split_hyphens and not pattern.endswith(f"|{HYPHEN_INFIX}"):  # a scispaCy that compiles otherwise
            infix_finditer = re.compile(f"{pattern}|{HYPHEN_INFIX}").finditer
        kept = ScispacyTokenizer(nlp.vocab, prefix_search=tokenizer.prefix_search,
                                 suffix_search=tokenizer.suffix_search, infix_finditer=infix_finditer,
                                 token_match=tokenizer.token_match, url_match=tokenizer.url_match)
        # scispaCy's own order: the language's exceptions, then its abbreviations over them; set last,
        # so that the special cases load once (each affix set after them loads them all again)
        kept.rules = {**nlp.Defaults.tokenizer_exceptions, **tokenizer.rules}
        return kept

    return make_tokenizer


def _with_hyphen_infix(combined_rule_tokenizer: Callable[[Any], Tokenizer]) -> Callable[[Any], Tokenizer]:
    """scispaCy's ``combined_rule_tokenizer`` whose infix regex also has :data:`HYPHEN_INFIX` as its last
    alternative: the same function run with an infix compiler that appends it, so the ~15,000-character
    infix pattern is compiled once (compiling scispaCy's and then the extended one again took ~40 ms of
    every load of the default). A copy of the function with its own globals: scispaCy's module is not
    changed, for this or any other thread. (A scispaCy that no longer compiles its infixes through that
    name gets the hyphen infix appended after, as before.)"""
    from spacy.util import compile_infix_regex

    def infixes_and_hyphen(entries: Iterable[str]) -> re.Pattern:
        return compile_infix_regex([*entries, HYPHEN_INFIX])

    function = combined_rule_tokenizer
    namespace = {**function.__globals__, "compile_infix_regex": infixes_and_hyphen}
    return FunctionType(function.__code__, namespace, function.__name__, function.__defaults__, function.__closure__)


def scispacy_blank(lang: str = "en", split_hyphens: bool = False) -> Language:
    """A blank pipeline with scispaCy's tokenizer: what the NER corpora are tokenised with."""
    import spacy

    config = {"nlp": {"tokenizer": {"@tokenizers": TOKENIZER_NAME, "split_hyphens": split_hyphens}}}
    return spacy.blank(lang, config=config)
