"""The Gradio page: layout and event wiring only; what it shows comes from :mod:`demo.logic`
(Link text), :mod:`demo.neighbours` (Neighbours, Compare) and :mod:`demo.projection` (the PCA
picture).

Every handler goes through :func:`demo.guard.guarded`, so that bad input becomes a sentence in
the page and an unexpected error becomes a short note (the traceback goes to the server log,
never to the browser).
"""
from __future__ import annotations

import logging
from typing import Any, List, Sequence, Tuple

import gradio as gr
import pandas as pd
from starlette.middleware import Middleware

from . import logic
from .examples import EXAMPLE_ABSTRACTS, EXAMPLE_LABELS, EXAMPLE_QUERIES
from .guard import guarded, warning
from .inputs import MAX_K, MAX_QUERY_CHARS, MAX_TEXT_CHARS
from .neighbours import (COMPACT_NEIGHBOUR_COLUMNS, NEIGHBOUR_COLUMNS, compact_neighbour_rows, compare_neighbours,
                         nearest_names, neighbour_rows)
from .options import DEFAULT_HOST
from .plots import neighbour_bar_figure, projection_figure
from .projection import neighbourhood_projection
from .request_guard import MAX_REQUEST_BYTES, RequestGuard
from .resources import DemoResources
from .spaces import EmbeddingSpace

logger = logging.getLogger(__name__)

TEXT_K_MAX = 10
DEFAULT_TEXT_K = 3
DEFAULT_NEIGHBOURS = 10
ABBREVIATION_COLUMNS = ["Short form", "Long form (what is linked)"]
# Every event that runs an encoder joins one queue of width 1: a Hugging Face fast tokenizer
# raises "Already borrowed" when two threads use it at once, and the linker's cache is not locked.
MODEL_QUEUE = {"concurrency_id": "model", "concurrency_limit": 1}
CSS = """
#link-entities span.label { text-transform: none !important; }
.sapbert-note { border-left: 4px solid #e9c46a; background: #fff8e5; padding: 0.5em 0.9em; border-radius: 4px; }
"""


def _theme() -> gr.themes.Base:
    # Local fonts only: the page must render on machines that cannot reach a font CDN.
    return gr.themes.Soft(primary_hue="teal", secondary_hue="amber",
                          font=["ui-sans-serif", "system-ui", "sans-serif"],
                          font_mono=["ui-monospace", "Consolas", "monospace"])


def _frame(rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame([list(r) for r in rows], columns=list(columns))


def _header(resources: DemoResources) -> str:
    kb = resources.kb
    stats = kb.stats()
    space = resources.spaces[0]
    lines = [
        "# spacy-sapbert · biomedical entity linking",
        "Finds disease and chemical mentions in text and links each one to a concept of the knowledge base "
        f"**{kb.name or 'KB'}** ({stats.concepts:,} concepts, {stats.names:,} names) by nearest-neighbour search "
        f"in an embedding space where synonyms sit together (SapBERT-style self-alignment). "
        f"Encoder: **{space.label}** ({resources.source}).",
    ]
    return "\n\n".join(lines)


def _notes(resources: DemoResources) -> str:
    return "\n\n".join(f"**Note.** {note}" for note in resources.notes)


THRESHOLD_INFO = {
    True: "Probability of being right (calibrated on BC5CDR dev) the best concept must reach to count as linked.",
    False: "Cosine similarity the best concept must reach to count as linked.",
}
SCORE_INFO = {
    True: "the probability that the concept is right, calibrated from the cosine similarity between the mention "
          "and the concept's closest name on BC5CDR dev",
    False: "the cosine similarity between the mention and the closest name of the concept (1 = identical after "
           "lower-casing and removing punctuation)",
}

HOW_TO = """
### How to read the results
- **Link text** highlights every mention the {ner} found; the label after it is the best concept
  (ID and canonical name). Grey mentions are those whose best score is below the threshold.
  Abbreviations defined in the text, such as *acute kidney injury (AKI)*, are linked through their long form.
- **Score** is {score}. A concept's score is its best name's score.
- **Neighbours** shows the KB names closest to any name you type, with their concepts, and a 2-D picture
  (PCA) of the query, those names and the other names of their concepts: with a well-aligned encoder each
  concept's names form one cluster and the query lands in the right one.
- **Compare** (when the demo was started with two encoders) shows the same query in both spaces.

Limits: texts up to {max_chars:,} characters; up to {max_k} neighbours.
"""


def build_app(resources: DemoResources) -> gr.Blocks:
    """The Gradio Blocks app for ``resources``; launch it with :func:`launch`."""
    spaces = resources.spaces
    primary = spaces[0]
    with gr.Blocks(title="spacy-sapbert demo", analytics_enabled=False) as app:
        gr.Markdown(_header(resources))
        if resources.notes:
            gr.Markdown(_notes(resources), elem_classes=["sapbert-note"])
        with gr.Tabs():
            with gr.Tab("Link text", id="link"):
                _link_tab(resources)
            with gr.Tab("Neighbours", id="neighbours"):
                _neighbour_tab(primary)
            if len(spaces) >= 2:
                with gr.Tab("Compare", id="compare"):
                    _compare_tab(spaces[:2])
            with gr.Tab("How it works", id="about"):
                gr.Markdown(HOW_TO.format(ner=resources.ner_source, max_chars=MAX_TEXT_CHARS, max_k=MAX_K,
                                          score=SCORE_INFO[resources.calibrated]))
    return app


def _link_tab(resources: DemoResources) -> None:
    text = gr.Textbox(label="Text", lines=6, max_lines=14, max_length=MAX_TEXT_CHARS,
                      placeholder="Paste a biomedical abstract, or pick an example below …", elem_id="link-text")
    gr.Examples(EXAMPLE_ABSTRACTS, inputs=[text], example_labels=EXAMPLE_LABELS, label="Example abstracts")
    with gr.Row():
        threshold = gr.Slider(0.0, 1.0, value=round(resources.default_threshold, 2), step=0.01, label="Threshold",
                              info=THRESHOLD_INFO[resources.calibrated], elem_id="link-threshold")
        top_k = gr.Slider(1, TEXT_K_MAX, value=DEFAULT_TEXT_K, step=1, label="Candidates per mention",
                          elem_id="link-k")
    button = gr.Button("Link entities", variant="primary", elem_id="link-button")
    status = gr.Markdown(elem_id="link-status")
    entities = gr.HighlightedText(label="Entities (colour: type · label: best concept)", show_legend=False,
                                  elem_id="link-entities")
    table = gr.Dataframe(headers=logic.MENTION_COLUMNS, label="Every mention with its top candidates",
                         interactive=False, wrap=True, elem_id="link-table")
    abbreviations = gr.Dataframe(headers=ABBREVIATION_COLUMNS, label="Abbreviations found in the text",
                                 interactive=False, elem_id="link-abbreviations")

    def empty() -> Tuple[Any, ...]:
        return (gr.HighlightedText(value=None), _frame([], logic.MENTION_COLUMNS), _frame([], ABBREVIATION_COLUMNS))

    @guarded(empty)
    def on_link(text_value: str, threshold_value: float, k_value: float) -> Tuple[Any, ...]:
        linked = logic.link_text(resources.nlp, text_value, threshold_value, int(k_value), resources.kb,
                                 resources.linker_name)
        value, colours = logic.highlighted(linked)
        return (logic.link_summary(linked, resources.ner_source),
                gr.HighlightedText(value=value, color_map=colours),
                _frame(logic.mention_rows(linked), logic.MENTION_COLUMNS),
                _frame(linked.abbreviations, ABBREVIATION_COLUMNS))

    outputs = [status, entities, table, abbreviations]
    button.click(on_link, [text, threshold, top_k], outputs, api_name="link", **MODEL_QUEUE)
    threshold.release(on_link, [text, threshold, top_k], outputs, api_visibility="private", **MODEL_QUEUE)
    top_k.release(on_link, [text, threshold, top_k], outputs, api_visibility="private", **MODEL_QUEUE)


def _neighbour_outputs(space: EmbeddingSpace, query: str, k: int) -> Tuple[str, pd.DataFrame, Any, Any]:
    neighbours = nearest_names(space, query, k)
    if not neighbours:
        return (warning("The index returned no names."), _frame([], NEIGHBOUR_COLUMNS), None, None)
    projection = neighbourhood_projection(space, query, neighbours)
    top = neighbours[0]
    status = (f"Closest name to “{query.strip()}”: **{top.name}** → {top.concept_id} {top.canonical_name} "
              f"(cosine {top.score:.3f}).")
    return (status, _frame(neighbour_rows(neighbours), NEIGHBOUR_COLUMNS),
            neighbour_bar_figure(neighbours, title=f"Cosine similarity in {space.label} (colour: concept)"),
            projection_figure(projection, title=f"“{query.strip()}” among its neighbours' concepts (PCA)"))


def _neighbour_tab(space: EmbeddingSpace) -> None:
    with gr.Row():
        query = gr.Textbox(label="Name", placeholder="e.g. HCQ, Plaquenil, heart attack", scale=3,
                           max_length=MAX_QUERY_CHARS, elem_id="nb-query")
        k = gr.Slider(1, MAX_K, value=DEFAULT_NEIGHBOURS, step=1, label="Neighbours (k)", scale=2,
                      elem_id="nb-k")
    gr.Examples(EXAMPLE_QUERIES, inputs=[query], label="Try")
    button = gr.Button("Find neighbours", variant="primary", elem_id="nb-button")
    status = gr.Markdown(elem_id="nb-status")
    table = gr.Dataframe(headers=NEIGHBOUR_COLUMNS, label="Nearest KB names", interactive=False,
                         elem_id="nb-table")
    with gr.Row():
        bars = gr.Plot(label="Cosine similarity (colour: concept)", show_label=False, format="png",
                       elem_id="nb-bars")
        scatter = gr.Plot(label="2-D projection", show_label=False, format="png", elem_id="nb-projection")

    def empty() -> Tuple[Any, ...]:
        return (_frame([], NEIGHBOUR_COLUMNS), None, None)

    @guarded(empty)
    def on_search(query_value: str, k_value: float) -> Tuple[Any, ...]:
        return _neighbour_outputs(space, query_value, int(k_value))

    button.click(on_search, [query, k], [status, table, bars, scatter], api_name="neighbours", **MODEL_QUEUE)
    query.submit(on_search, [query, k], [status, table, bars, scatter], api_visibility="private", **MODEL_QUEUE)


def _compare_tab(spaces: Sequence[EmbeddingSpace]) -> None:
    gr.Markdown("The same query in two embedding spaces over the same knowledge base: "
                "what self-alignment changed.")
    with gr.Row():
        query = gr.Textbox(label="Name", placeholder="e.g. HCQ, heart attack", scale=3,
                           max_length=MAX_QUERY_CHARS, elem_id="cmp-query")
        k = gr.Slider(1, MAX_K, value=DEFAULT_NEIGHBOURS, step=1, label="Neighbours (k)", scale=2,
                      elem_id="cmp-k")
    gr.Examples(EXAMPLE_QUERIES, inputs=[query], label="Try")
    button = gr.Button("Compare", variant="primary", elem_id="cmp-button")
    summary = gr.Markdown(elem_id="cmp-summary")
    outputs: List[Any] = []
    with gr.Row():
        for i, space in enumerate(spaces):
            with gr.Column():
                gr.Markdown(f"### {space.label}")
                outputs.append(gr.Dataframe(headers=COMPACT_NEIGHBOUR_COLUMNS, interactive=False, wrap=True,
                                            column_widths=["9%", "36%", "41%", "14%"], label="Nearest KB names",
                                            elem_id=f"cmp-table-{i}"))
                outputs.append(gr.Plot(label="2-D projection", show_label=False, format="png",
                                       elem_id=f"cmp-projection-{i}"))

    def empty() -> Tuple[Any, ...]:
        return tuple(x for _ in spaces for x in (_frame([], COMPACT_NEIGHBOUR_COLUMNS), None))

    @guarded(empty)
    def on_compare(query_value: str, k_value: float) -> Tuple[Any, ...]:
        comparison = compare_neighbours(spaces, query_value, int(k_value))
        out: List[Any] = [comparison.summary()]
        for space, (_, neighbours) in zip(spaces, comparison.results):
            projection = neighbourhood_projection(space, query_value, neighbours)
            out.append(_frame(compact_neighbour_rows(neighbours), COMPACT_NEIGHBOUR_COLUMNS))
            out.append(projection_figure(projection, title=f"{space.label}: “{query_value.strip()}” (PCA)"))
        return tuple(out)

    button.click(on_compare, [query, k], [summary] + outputs, api_name="compare", **MODEL_QUEUE)
    query.submit(on_compare, [query, k], [summary] + outputs, api_visibility="private", **MODEL_QUEUE)


def launch(app: gr.Blocks, host: str = DEFAULT_HOST, port: int | None = None, share: bool = False,
           block: bool = True) -> Tuple[Any, str, str]:
    """Serve ``app`` on ``host:port`` (127.0.0.1 and no public share link unless asked).

    With ``block=False`` the server runs in a background thread and this returns at once
    (tests, notebooks); ``app.close()`` stops it. Uploads and request bodies over
    :data:`~demo.request_guard.MAX_REQUEST_BYTES` are refused (:mod:`demo.request_guard`).
    """
    if share:
        logger.warning("share=True: Gradio will open a public link to this demo")
    return app.launch(server_name=host, server_port=port, share=share, show_error=False, quiet=True,
                      prevent_thread_lock=not block, theme=_theme(), css=CSS, footer_links=[],
                      app_kwargs={"middleware": [Middleware(RequestGuard, max_bytes=MAX_REQUEST_BYTES)]},
                      max_file_size=MAX_REQUEST_BYTES)
