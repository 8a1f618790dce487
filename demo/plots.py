"""Matplotlib figures for the demo (built on ``Figure`` directly: no pyplot global state,
so concurrent requests in Gradio's worker threads cannot draw into each other's plots)."""
from __future__ import annotations

from typing import Dict, Optional, Sequence

from matplotlib.figure import Figure

from .neighbours import Neighbour
from .projection import Projection

CONCEPT_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
MAX_LABEL_CHARS = 28


def _short(text: str) -> str:
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"


def projection_figure(projection: Projection, title: str = "", width: float = 7.0,
                      height: float = 6.5) -> Figure:
    """Scatter of a :class:`~demo.projection.Projection`: one colour per concept, the query as a black
    star, the top-k neighbours as filled circles and the concepts' other names as rings."""
    fig = Figure(figsize=(width, height), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    concepts = list(projection.concept_names)
    colours = concept_colours(concepts)
    for cid in concepts:
        label = f"{cid} {projection.concept_names.get(cid, '')}".strip()
        for kind, marker_face in (("neighbour", colours[cid]), ("synonym", "none")):
            pts = [p for p in projection.points if p.concept == cid and p.kind == kind]
            if not pts:
                continue
            ax.scatter([p.x for p in pts], [p.y for p in pts], s=60 if kind == "neighbour" else 40,
                       facecolors=marker_face, edgecolors=colours[cid], linewidths=1.5,
                       label=_short(label) if kind == "neighbour" or not any(
                           p.concept == cid and p.kind == "neighbour" for p in projection.points) else None)
    query: Optional[object] = next((p for p in projection.points if p.kind == "query"), None)
    if query is not None:
        ax.scatter([query.x], [query.y], marker="*", s=260, c="black", label=f"query: {_short(query.text)}",
                   zorder=5)
    for p in projection.points:
        if p.kind != "synonym" or len(projection.points) <= 30:
            ax.annotate(_short(p.text), (p.x, p.y), xytext=(4, 3), textcoords="offset points", fontsize=7,
                        color="black" if p.kind == "query" else colours.get(p.concept, "#444444"))
    ev1, ev2 = projection.explained
    ax.set_xlabel(f"PC 1 ({ev1:.0%} of variance)")
    ax.set_ylabel(f"PC 2 ({ev2:.0%} of variance)")
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.25)
    # Below the axes, so the legend never hides a point.
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    fig.tight_layout()
    return fig


def concept_colours(concept_ids) -> Dict[str, str]:
    """The colour of each concept, in order of first appearance (shared by both charts)."""
    out: Dict[str, str] = {}
    for cid in concept_ids:
        if cid not in out:
            out[cid] = CONCEPT_COLOURS[len(out) % len(CONCEPT_COLOURS)]
    return out


def neighbour_bar_figure(neighbours: Sequence[Neighbour], title: str = "", width: float = 6.0) -> Figure:
    """Horizontal bars of cosine similarity, best on top, one colour per concept."""
    height = 1.2 + 0.32 * max(len(neighbours), 1)
    fig = Figure(figsize=(width, height), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    colours = concept_colours(n.concept_id for n in neighbours)
    labels = [_short(f"{n.rank}. {n.name}") for n in neighbours]
    ax.barh(range(len(neighbours)), [n.score for n in neighbours],
            color=[colours[n.concept_id] for n in neighbours])
    ax.set_yticks(range(len(neighbours)), labels, fontsize=8)
    ax.invert_yaxis()
    low = min([n.score for n in neighbours] + [0.0])
    ax.set_xlim(min(low, 0.0), 1.25)  # room for the score labels right of the bars
    ax.set_xticks([t / 5 for t in range(0, 6)])
    ax.set_xlabel("cosine similarity to the query")
    for i, n in enumerate(neighbours):
        ax.text(max(n.score, 0) + 0.01, i, f"{n.score:.2f}  {n.concept_id}", va="center", fontsize=7)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.25)
    fig.tight_layout()
    return fig
