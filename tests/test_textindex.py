"""The local text index: passage readers, the embedder and its cache, real FAISS builds (flat and
HNSW), resumable and atomic builds, opening errors, the ``local`` retriever and ``ragplan index``.

Everything runs the real all-MiniLM-L6-v2 (loaded once per session) over a 30-passage corpus the
tests write.
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import json
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragplan.tools.retrieval import Passage, Retriever  # noqa: E402
from ragplan.tools.retrievers import make_retriever  # noqa: E402
from ragplan.tools.textindex import (  # noqa: E402
    PassageFormatError, ReadStats, TextIndex, TextIndexError, build_index, read_passages,
)

CORPUS = [
    ("Volcano", "A volcano is an opening in the crust of a planet where molten lava, ash and gases erupt from a magma chamber."),
    ("Photosynthesis", "Photosynthesis is how green plants use sunlight, water and carbon dioxide to make sugar and release oxygen."),
    ("Chess", "Chess is a board game for two players; each moves sixteen pieces, and checkmating the king wins."),
    ("Honey bee", "Honey bees live in hives, collect nectar and pollen from flowers, and make honey and beeswax."),
    ("Jazz", "Jazz is a music genre from New Orleans known for swing rhythms, blue notes and improvisation on saxophone and trumpet."),
    ("Espresso", "Espresso is a concentrated coffee brewed by forcing hot water through finely ground coffee beans."),
    ("Black hole", "A black hole is a region of spacetime where gravity is so strong that not even light can escape."),
    ("Tennis", "Tennis is a racket sport in which players hit a ball over a net; Wimbledon is its oldest tournament."),
    ("Sourdough", "Sourdough bread is leavened by a starter of wild yeast and lactic acid bacteria, giving a tangy flavour."),
    ("Glacier", "A glacier is a persistent body of dense ice that moves slowly downhill under its own weight."),
    ("Vaccine", "A vaccine trains the immune system to recognise a pathogen so the body can fight future infections."),
    ("Bitcoin", "Bitcoin is a decentralised digital currency recorded on a blockchain and created by mining."),
    ("Origami", "Origami is the Japanese art of folding a single sheet of paper into shapes such as cranes."),
    ("Tsunami", "A tsunami is a series of huge ocean waves caused by an undersea earthquake that floods coastlines."),
    ("Violin", "The violin is a bowed string instrument with four strings tuned in fifths, played with a bow."),
    ("Pyramids of Giza", "The pyramids of Giza are ancient Egyptian tombs built for pharaohs such as Khufu."),
    ("Penguin", "Penguins are flightless seabirds of the Southern Hemisphere that swim using flipper-like wings."),
    ("Marathon", "A marathon is a long-distance running race of 42.195 kilometres."),
    ("Solar panel", "A solar panel converts sunlight into electricity with photovoltaic cells made of silicon."),
    ("Sushi", "Sushi is a Japanese dish of vinegared rice with raw fish such as tuna and salmon."),
    ("Tornado", "A tornado is a violently rotating column of air reaching from a thunderstorm to the ground."),
    ("Python language", "Python is a programming language known for readable code, indentation and a large standard library."),
    ("Coral reef", "Coral reefs are underwater ecosystems built by colonies of tiny coral polyps in warm shallow seas."),
    ("Piano", "The piano is a keyboard instrument whose hammers strike strings when the keys are pressed."),
    ("Olympic Games", "The Olympic Games are an international multi-sport event held every four years."),
    ("DNA", "DNA is the molecule that carries genetic instructions in a double helix of nucleotide base pairs."),
    ("Cheese", "Cheese is a dairy product made by curdling milk with rennet and ageing the curds."),
    ("Moon landing", "In 1969 Apollo 11 landed astronauts Neil Armstrong and Buzz Aldrin on the Moon."),
    ("Wind turbine", "A wind turbine turns the kinetic energy of wind into electrical power with rotating blades."),
    ("Rainforest", "Tropical rainforests are dense, humid forests near the equator with very high biodiversity."),
]
QUERIES = {
    "Which mountains erupt with lava?": "Volcano",
    "How do plants turn light into food?": "Photosynthesis",
    "insects that produce honey": "Honey bee",
    "coffee made under pressure": "Espresso",
    "the first people to walk on the Moon": "Moon landing",
    "a long race run on foot": "Marathon",
    "giant waves after an earthquake at sea": "Tsunami",
    "cryptocurrency and blockchain": "Bitcoin",
}


def write_corpus(path: Path, corpus: list[tuple[str, str]] = CORPUS) -> Path:
    """The corpus as JSONL ``{id, title, contents}`` (ids p00…p29)."""
    path.write_text("".join(json.dumps({"id": f"p{i:02d}", "title": t, "contents": c}) + "\n"
                            for i, (t, c) in enumerate(corpus)))
    return path


class CountingEncoder:
    """Wraps an embedder's ``encode`` to count calls and optionally fail on the n-th (a killed build)."""

    def __init__(self, embedder, fail_on: int | None = None) -> None:
        self.inner, self.fail_on, self.calls = embedder.encode, fail_on, 0

    def __call__(self, texts, *args, **kwargs):
        self.calls += 1
        if self.fail_on is not None and self.calls == self.fail_on:
            raise KeyboardInterrupt("simulated kill")
        return self.inner(texts, *args, **kwargs)


@pytest.fixture(scope="session")
def embedder():
    """The process-wide default embedder (the model loads once per test session)."""
    from ragplan.tools.embeddings import get_embedder

    return get_embedder()


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "passages.jsonl")


@pytest.fixture(scope="module")
def flat_index(corpus_file, embedder, tmp_path_factory) -> TextIndex:
    out = tmp_path_factory.mktemp("flat") / "idx"
    report = build_index(corpus_file, out, progress=False)
    assert (report.count, report.index_type, report.dim) == (30, "flat", 384)
    return TextIndex.open(out)


# --- embedder -------------------------------------------------------------------------------------

def test_embedder_unit_rows_and_cache(embedder):
    from ragplan.tools.embeddings import get_embedder

    assert get_embedder() is embedder and get_embedder(embedder.model_path) is embedder
    texts = ["The cache test sentence number one.", "Another, different cache test sentence."]
    v1 = embedder.encode(texts)
    assert v1.shape == (2, embedder.dim) and v1.dtype == np.float32
    assert np.allclose(np.linalg.norm(v1, axis=1), 1.0, atol=1e-5)
    hits, misses = embedder.hits, embedder.misses
    v2 = embedder.encode(texts + texts[:1])
    assert embedder.hits - hits == 3 and embedder.misses == misses
    assert np.allclose(v2[:2], v1) and np.allclose(v2[2], v1[0])
    assert embedder.encode([]).shape == (0, embedder.dim)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        assert all(e is embedder for e in pool.map(lambda _: get_embedder(), range(8)))


def test_embedding_cache_is_bounded_lru(embedder, monkeypatch):
    monkeypatch.setattr(embedder, "cache_size", 2)
    embedder._cache.clear()
    try:
        embedder.encode(["lru one is here", "lru two is here", "lru three is here"])
        assert len(embedder._cache) == 2
        misses = embedder.misses
        embedder.encode(["lru three is here"])  # kept
        assert embedder.misses == misses
        embedder.encode(["lru one is here"])  # evicted first
        assert embedder.misses == misses + 1
        embedder.encode(["not cached at all"], cache=False)
        assert "not cached at all" not in embedder._cache
    finally:
        embedder._cache.clear()


def test_model_path_must_be_a_local_model_dir(tmp_path):
    from ragplan.tools.embeddings import EmbeddingModelError, get_embedder

    with pytest.raises(EmbeddingModelError, match=str(tmp_path)):
        get_embedder(str(tmp_path))  # a directory, but no model in it
    with pytest.raises(EmbeddingModelError, match="never fetched from a hub"):
        get_embedder("sentence-transformers/all-mpnet-base-v2")


# --- readers --------------------------------------------------------------------------------------

def test_read_jsonl_flashrag_and_gzip(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"id": 7, "title": "T", "contents": "Body."}) + "\n\n"
                 + json.dumps({"id": "fr1", "contents": '"Aaron"\nAaron is a prophet.'}) + "\n"
                 + json.dumps({"id": "fr2", "contents": 'No title line, "quoted" words.'}) + "\n")
    ps = list(read_passages(f))
    assert [(p.id, p.title, p.text) for p in ps] == [
        ("7", "T", "Body."), ("fr1", "Aaron", "Aaron is a prophet."), ("fr2", "", 'No title line, "quoted" words.')]
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(f.read_bytes()))
    assert [p.id for p in read_passages(gz)] == ["7", "fr1", "fr2"]


def test_read_tsv_both_column_orders(tmp_path):
    dpr = tmp_path / "psgs.tsv"
    dpr.write_text('id\ttext\ttitle\n1\t"Aaron ( or ; ""Ahärôn"") is a prophet."\tAaron\n2\tPlain text\tSecond\n')
    assert [(p.id, p.title, p.text) for p in read_passages(dpr)] == [
        ("1", "Aaron", 'Aaron ( or ; "Ahärôn") is a prophet.'), ("2", "Second", "Plain text")]
    other = tmp_path / "other.tsv"
    other.write_text("id\ttitle\ttext\nx1\tVolcano\tLava flows.\n")
    assert [(p.id, p.title, p.text) for p in read_passages(other)] == [("x1", "Volcano", "Lava flows.")]
    headless = tmp_path / "headless.tsv"
    headless.write_text("1\tsome text\tTitle\n")
    with pytest.raises(PassageFormatError, match=r"headless\.tsv:1: .*header"):
        list(read_passages(headless))


def test_malformed_lines_name_file_and_line_or_are_skipped(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"id": "1", "contents": "ok"}\n{"id": "2", "contents": "broken\n{"id": "3"}\n[1, 2]\n'
                 '{"id": "4", "title": "T", "contents": "fine"}\n')
    with pytest.raises(PassageFormatError, match=r"bad\.jsonl:2: not a JSON object"):
        list(read_passages(f))
    stats = ReadStats()
    assert [p.id for p in read_passages(f, skip_malformed=True, stats=stats)] == ["1", "4"]
    assert (stats.read, stats.skipped) == (2, 3)
    assert any("bad.jsonl:3: no 'contents'" in e for e in stats.errors)
    t = tmp_path / "bad.tsv"
    t.write_text("id\ttext\ttitle\n1\tgood\tA\n2\tonly two\n")
    with pytest.raises(PassageFormatError, match=r"bad\.tsv:3: 2 tab-separated fields, the header has 3"):
        list(read_passages(t))


def test_bytes_that_are_not_utf8_name_their_line(tmp_path):
    """A line (or a quoted TSV field over several lines) with bytes that are not UTF-8 is one malformed passage."""
    t = tmp_path / "latin1.tsv"
    t.write_bytes(b'id\ttext\ttitle\n1\tgood\tA\n2\t"caf\xe9\nau lait"\tB\n3\tfine\tC\n4\t\xff\tD\n')
    with pytest.raises(PassageFormatError, match=r"latin1\.tsv:3: not UTF-8 text"):
        list(read_passages(t))
    stats = ReadStats()
    assert [p.id for p in read_passages(t, skip_malformed=True, stats=stats)] == ["1", "3"]
    assert [e.split(": ")[0] for e in stats.errors] == [f"{t}:3", f"{t}:6"]
    j = tmp_path / "latin1.jsonl"
    j.write_bytes(b'{"id": "1", "contents": "ok"}\n{"id": "2", "contents": "caf\xe9"}\n')
    with pytest.raises(PassageFormatError, match=r"latin1\.jsonl:2: not UTF-8 text"):
        list(read_passages(j))


# --- search ---------------------------------------------------------------------------------------

def test_flat_index_finds_the_topic_first(flat_index):
    assert flat_index.meta["index_type"] == "flat" and flat_index.count == 30
    for query, title in QUERIES.items():
        hits = flat_index.search(query, k=5)
        assert hits[0].title == title, (query, [h.title for h in hits])
        assert len(hits) == 5 and all(h.source == "local" for h in hits)
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True) and -1.0 <= scores[-1] <= scores[0] <= 1.0 + 1e-5
    top = flat_index.search("molten lava", k=1)[0]
    assert top.id == "p00" and top.text.startswith("A volcano") and top.meta["row"] == 0
    assert len(flat_index.search("anything", k=100)) == 30 and flat_index.search("x", k=0) == []
    many = flat_index.search_many(list(QUERIES), k=3)
    assert [[p.id for p in hits] for hits in many] == [[p.id for p in flat_index.search(q, 3)] for q in QUERIES]


def test_hnsw_above_threshold_has_the_same_top1(corpus_file, flat_index, tmp_path):
    report = build_index(corpus_file, tmp_path / "hnsw", flat_threshold=10, progress=False)
    assert report.index_type == "hnsw"
    hnsw = TextIndex.open(tmp_path / "hnsw")
    assert hnsw.meta["hnsw"] == {"M": 32, "efConstruction": 200, "efSearch": 128}
    for query in QUERIES:
        assert hnsw.search(query, 1)[0].id == flat_index.search(query, 1)[0].id
    # a threshold equal to the count is HNSW; one above it is flat
    assert build_index(corpus_file, tmp_path / "eq", flat_threshold=30, progress=False).index_type == "hnsw"
    assert build_index(corpus_file, tmp_path / "above", flat_threshold=31, progress=False).index_type == "flat"


def test_local_retriever_and_make_retriever(flat_index):
    r = flat_index
    assert isinstance(r, Retriever) and r.name == "local"
    assert r.search("honey from flowers", 2)[0].title == "Honey bee"
    ctx = SimpleNamespace(retriever="local", index_dir=str(flat_index.root), embedding_model="")
    made = make_retriever(ctx)
    assert isinstance(made, TextIndex) and made is make_retriever(ctx)
    assert isinstance(made.search("espresso machine", 1)[0], Passage)


# --- builds: resumable, atomic, fingerprinted ----------------------------------------------------

def test_killed_build_resumes_without_re_embedding_finished_shards(corpus_file, embedder, monkeypatch, tmp_path):
    out = tmp_path / "idx"
    killer = CountingEncoder(embedder, fail_on=2)
    monkeypatch.setattr(embedder, "encode", killer)
    with pytest.raises(KeyboardInterrupt):
        build_index(corpus_file, out, shard_size=10, progress=False)
    assert killer.calls == 2 and (out / ".build" / "emb_00000.npy").is_file()
    assert not (out / ".build.lock").exists()  # released and removed however the build ends
    with open(out / ".build.lock", "w") as held:  # another build at work
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(TextIndexError, match="another build is writing"):
            build_index(corpus_file, out, shard_size=10, progress=False)
        assert (out / ".build.lock").exists()  # its lock is not taken from it
    (out / ".build.lock").unlink()
    assert not (out / "meta.json").exists() and not (out / "index.faiss").exists()
    with pytest.raises(TextIndexError, match="incomplete text index.*1 embedding shard.*resume"):
        TextIndex.open(out)

    counter = CountingEncoder(embedder)
    monkeypatch.setattr(embedder, "encode", counter)
    report = build_index(corpus_file, out, shard_size=10, progress=False)
    assert counter.calls == 2  # shards 1 and 2 only: shard 0 was not embedded again
    assert (report.shards, report.shards_reused, report.count) == (3, 1, 30)
    assert not (out / ".build").exists() and not (out / ".build.lock").exists()
    again = build_index(corpus_file, out, shard_size=10, progress=False)
    assert again.up_to_date and counter.calls == 2  # finished and unchanged: nothing to do
    assert TextIndex.open(out).search("coffee made under pressure", 1)[0].title == "Espresso"


def test_changed_input_does_not_resume_from_old_shards(embedder, monkeypatch, tmp_path):
    src = write_corpus(tmp_path / "c.jsonl")
    out = tmp_path / "idx"
    monkeypatch.setattr(embedder, "encode", CountingEncoder(embedder, fail_on=2))
    with pytest.raises(KeyboardInterrupt):
        build_index(src, out, shard_size=10, progress=False)
    changed = list(CORPUS)
    changed[0] = ("Submarine", "A submarine is a watercraft that operates independently underwater with periscopes.")
    write_corpus(src, changed)
    counter = CountingEncoder(embedder)
    monkeypatch.setattr(embedder, "encode", counter)
    report = build_index(src, out, shard_size=10, progress=False)
    assert counter.calls == 3 and report.shards_reused == 0
    assert TextIndex.open(out).search("an underwater boat with a periscope", 1)[0].id == "p00"


def test_malformed_input_leaves_no_index(embedder, monkeypatch, tmp_path):
    src = write_corpus(tmp_path / "c.jsonl")
    src.write_text(src.read_text() + "{not json}\n")
    counter = CountingEncoder(embedder)
    monkeypatch.setattr(embedder, "encode", counter)
    with pytest.raises(PassageFormatError, match=r"c\.jsonl:31:"):
        build_index(src, tmp_path / "idx", progress=False)
    assert counter.calls == 0 and not (tmp_path / "idx" / "meta.json").exists()
    report = build_index(src, tmp_path / "idx", progress=False, skip_malformed=True)
    assert (report.count, report.skipped_lines) == (30, 1)


def test_open_errors_are_clear(flat_index, tmp_path):
    with pytest.raises(TextIndexError, match="does not exist"):
        TextIndex.open(tmp_path / "nowhere")
    with pytest.raises(TextIndexError, match="no meta.json"):
        TextIndex.open(tmp_path)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "meta.json").write_text((flat_index.root / "meta.json").read_text())
    with pytest.raises(TextIndexError, match="index.faiss is missing"):
        TextIndex.open(broken)
    (broken / "meta.json").write_text("{not json")
    with pytest.raises(TextIndexError, match=r"damaged text index at .*meta.json: line 1 column 2.*; rebuild it"):
        TextIndex.open(broken)


def test_search_with_k_0_embeds_nothing(flat_index, monkeypatch):
    monkeypatch.setattr(flat_index.embedder, "encode", lambda *a, **k: pytest.fail("embedded for k=0"))
    assert flat_index.search_many(["a", "b"], 0) == [[], []] and flat_index.search("a", 0) == []


# --- command line ---------------------------------------------------------------------------------

def run_cli(argv: list[str]) -> int:
    from ragplan.cli.index import add_parser, run

    parser = argparse.ArgumentParser(prog="ragplan")
    add_parser(parser.add_subparsers(dest="command"))
    return run(parser.parse_args(argv))


def test_index_cli_build_and_search(corpus_file, embedder, tmp_path, capsys):
    out = tmp_path / "cli-idx"
    assert run_cli(["index", "build", "--passages", str(corpus_file), "--out", str(out), "--no-progress"]) == 0
    assert "indexed 30 passages (flat, dim 384)" in capsys.readouterr().out
    assert run_cli(["index", "build", "--passages", str(corpus_file), "--out", str(out), "--no-progress"]) == 0
    assert "up to date" in capsys.readouterr().out
    assert run_cli(["index", "search", "--index", str(out), "insects that produce honey", "-k", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[1].split()[0] == "1" and "Honey bee" in lines[1] and "p03" in lines[1]
    assert run_cli(["index", "search", "--index", str(out), "a long race run on foot", "--json", "-k", "2"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["rank"] for r in rows] == [1, 2] and rows[0]["title"] == "Marathon" and rows[0]["id"] == "p17"


def test_index_cli_bad_input_exits_2(tmp_path, capsys):
    assert run_cli(["index", "build", "--passages", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    assert run_cli(["index", "build", "--passages", str(bad), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "bad.jsonl:1: no 'contents'" in capsys.readouterr().err
    assert run_cli(["index", "build", "--passages", str(bad), "--out", str(tmp_path / "o"),
                    "--model-path", str(tmp_path)]) == 2
    assert "not a sentence-transformers model directory" in capsys.readouterr().err
    assert run_cli(["index", "search", "--index", str(tmp_path / "none"), "q"]) == 2
    assert "no text index" in capsys.readouterr().err
    assert run_cli(["index", "search", "--index", str(tmp_path), "q", "-k", "0"]) == 2


# --- given sentences (a dataset's own segmentation) ------------------------------------------------

BONAVENTURE = ["Saint Bonaventure, O.F.M. ( c. 1221 – 15 July 1274), born Giovanni di Fidanza, was an Italian "
               "medieval Franciscan scholastic theologian and philosopher.",
               "He was the seventh Minister General of the Order of Friars Minor."]


def test_given_sentences_survive_the_index_and_the_ranker(tmp_path, embedder):
    from ragplan.tools.retrieval import Passage, SentenceRanker, split_sentences
    from ragplan.tools.textindex import build_index

    # a regex splitter breaks the first sentence at the initials ("( c." then a number)
    assert len(split_sentences(" ".join(BONAVENTURE))) > 2
    src = tmp_path / "p.jsonl"
    src.write_text(json.dumps({"id": "b", "title": "Bonaventure", "contents": " ".join(BONAVENTURE),
                               "sentences": BONAVENTURE}) + "\n"
                   + json.dumps({"id": "e", "title": "Everest", "contents": "Mount Everest is the highest mountain."}) + "\n")
    build_index(src, tmp_path / "idx", progress=False)
    with TextIndex.open(tmp_path / "idx") as index:
        hits = index.search("Who was the seventh Minister General of the Franciscans?", k=2)
        bona = next(h for h in hits if h.title == "Bonaventure")
        assert bona.sentences == BONAVENTURE and next(h for h in hits if h.title == "Everest").sentences == []
        ranked = SentenceRanker(embedder).rank("When was Bonaventure born?", hits, n=10)
    bona_ev = [e for e in ranked if e.title == "Bonaventure"]
    assert sorted(e.sentence for e in bona_ev) == sorted(BONAVENTURE)      # whole, not cut at "c."
    assert sorted(e.sentence_index for e in bona_ev) == [0, 1]
    assert all(e.sentence_index is None for e in ranked if e.title == "Everest")
    assert "sentence_index" in bona_ev[0].to_dict()
    assert Passage("x", "T", "A b. C d.", sentences=["  A b.  ", "", "C d."]).sentence_list() == [(0, "A b."), (2, "C d.")]


def test_bad_sentences_field_and_an_old_store_without_the_column(tmp_path):
    import sqlite3

    from ragplan.tools.textindex.store import PassageStore

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "1", "contents": "x", "sentences": "not a list"}) + "\n")
    with pytest.raises(PassageFormatError, match="'sentences' is not a list of strings"):
        list(read_passages(bad))
    old = tmp_path / "old.sqlite"  # a store written before the sentences column existed
    con = sqlite3.connect(old)
    con.execute("CREATE TABLE passages (row INTEGER PRIMARY KEY, id TEXT NOT NULL, title TEXT NOT NULL, text TEXT NOT NULL)")
    con.execute("INSERT INTO passages VALUES (0, 'a', 'A', 'text')")
    con.commit()
    con.close()
    store = PassageStore(old)
    assert store.get([0])[0].sentences == [] and store.range(0, 1)[0].text == "text"
    store.close()
