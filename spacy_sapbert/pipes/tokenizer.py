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
from types import SimpleNamespace
from typing import Callable

from spacy.language import Language
from spacy.tokenizer import Tokenizer
from spacy.util import registry

TOKENIZER_NAME = "sapbert.ScispacyTokenizer.v1"
HYPHEN_INFIX = r"(?<=[A-Za-z0-9])[-/](?=[A-Za-z])"


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
        # each affix set on a tokenizer (the hyphen infix below) loads all its special cases again.
        bare = SimpleNamespace(vocab=nlp.vocab, Defaults=SimpleNamespace(tokenizer_exceptions={}),
                               tokenizer=SimpleNamespace(token_match=nlp.Defaults.token_match))
        with warnings.catch_warnings():
            # scispaCy's character classes trip a harmless "possible set union" FutureWarning.
            warnings.simplefilter("ignore", FutureWarning)
            tokenizer = combined_rule_tokenizer(bare)
        if split_hyphens:
            pattern = tokenizer.infix_finditer.__self__.pattern  # type: ignore[attr-defined]
            tokenizer.infix_finditer = re.compile(f"{pattern}|{HYPHEN_INFIX}").finditer
        # scispaCy's own order: the language's exceptions, then its abbreviations over them
        tokenizer.rules = {**nlp.Defaults.tokenizer_exceptions, **tokenizer.rules}
        return tokenizer

    return make_tokenizer


def scispacy_blank(lang: str = "en", split_hyphens: bool = False) -> Language:
    """A blank pipeline with scispaCy's tokenizer: what the NER corpora are tokenised with."""
    import spacy

    config = {"nlp": {"tokenizer": {"@tokenizers": TOKENIZER_NAME, "split_hyphens": split_hyphens}}}
    return spacy.blank(lang, config=config)
