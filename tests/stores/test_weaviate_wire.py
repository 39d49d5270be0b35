"""The Weaviate stand-in itself (tests/weaviate_wire): its scoring against the examples Weaviate's
documents give and against hand-computed formulas, and, through the real client, the settings it
honours and the requests it refuses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from weaviate_wire import scoring

pytestmark = pytest.mark.weaviate


@pytest.mark.parametrize(
    "text, tokens",
    [  # the examples of https://weaviate.io/developers/academy/py/tokenization/options
        ("Why, hello there!", ["why", "hello", "there"]),
        ("Lois & Clark: The New Adventures of Superman", ["lois", "clark", "the", "new", "adventures", "of", "superman"]),
        ("variable_name", ["variable", "name"]),
        ("Email: john.doe@example.com", ["email", "john", "doe", "example", "com"]),
    ],
)
def test_word_tokenization_matches_weaviate_examples(text: str, tokens: list[str]) -> None:
    assert scoring.tokenize(text, "word") == tokens


def test_other_tokenizations() -> None:
    assert scoring.tokenize("Variable_Name a&b", "lowercase") == ["variable_name", "a&b"]
    assert scoring.tokenize("Variable_Name a&b", "whitespace") == ["Variable_Name", "a&b"]
    assert scoring.tokenize("  Variable Name ", "field") == ["Variable Name"]
    with pytest.raises(ValueError, match="trigram"):
        scoring.tokenize("x", "trigram")


def test_bm25f_by_hand() -> None:
    """N = 3, "b" in one document of length 2 (avg length 2): idf = ln(1 + 2.5 / 1.5),
    tf = 1 / (1 + 1.2); a repeated query term doubles the idf; no match scores 0."""
    docs = [{"t": ["a", "b"]}, {"t": ["a", "c"]}, {"t": ["c", "c"]}]
    scores = scoring.bm25f("b", docs, ["t"], {"t": "word"}, k1=1.2, b=0.75)
    expected = math.log(1 + 2.5 / 1.5) / 2.2
    assert scores == pytest.approx([expected, 0.0, 0.0])
    assert scoring.bm25f("b B", docs, ["t"], {"t": "word"}, 1.2, 0.75)[0] == pytest.approx(2 * expected)
    # term frequency 2 in a document of average length: 2 / (2 + 1.2)
    c = scoring.bm25f("c", docs, ["t"], {"t": "word"}, 1.2, 0.75)
    idf_c = math.log(1 + 1.5 / 2.5)
    assert c == pytest.approx([0.0, idf_c / 2.2, idf_c * 2 / 3.2])


def test_relative_score_fusion_matches_the_documented_example() -> None:
    """hybrid_fusion.go's example: scores [1, 8, 6, 11] normalise to [0, 0.7, 0.5, 1]."""
    fused = scoring.relative_score_fusion([(1.0, [(3, 11.0), (1, 8.0), (2, 6.0), (0, 1.0)])])
    assert fused == [(3, pytest.approx(1.0)), (1, pytest.approx(0.7)), (2, pytest.approx(0.5)), (0, pytest.approx(0.0))]
    # all equal: each gets the full weight; the weights add across the sets
    both = scoring.relative_score_fusion([(0.25, [(0, 2.0), (1, 2.0)]), (0.75, [(1, 0.9), (2, 0.1)])])
    assert dict(both) == pytest.approx({0: 0.25, 1: 1.0, 2: 0.0})


def test_ranked_fusion_counts_ranks_from_zero() -> None:
    fused = dict(scoring.ranked_fusion([(0.5, [(0, 9.0), (1, 8.0)]), (0.5, [(1, 3.0)])]))
    assert fused == pytest.approx({0: 0.5 / 60, 1: 0.5 / 61 + 0.5 / 60})


def test_distances() -> None:
    v = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])
    q = np.array([1.0, 1.0])
    assert scoring.distances(v, q, "cosine") == pytest.approx([1 - 1 / math.sqrt(2), 1 - 1 / math.sqrt(2), 1 + 1 / math.sqrt(2)])
    assert scoring.distances(v, q, "dot") == pytest.approx([-1.0, -2.0, 1.0])
    assert scoring.distances(v, q, "l2-squared") == pytest.approx([1.0, 2.0, 5.0])
    assert scoring.distances(v, q, "manhattan") == pytest.approx([1.0, 2.0, 3.0])


# --- through the real client ---------------------------------------------------------------------
def _client(wire):
    import weaviate

    return weaviate.connect_to_local(host=wire.host, port=wire.http_port, grpc_port=wire.grpc_port)


def test_the_collection_distance_metric_is_honoured(weaviate_wire) -> None:
    from weaviate.classes.config import Configure, DataType, Property, VectorDistances
    from weaviate.classes.query import MetadataQuery

    with _client(weaviate_wire) as client:
        col = client.collections.create(
            "Dots",
            properties=[Property(name="t", data_type=DataType.TEXT)],
            vector_config=Configure.Vectors.self_provided(
                vector_index_config=Configure.VectorIndex.hnsw(distance_metric=VectorDistances.DOT)
            ),
        )
        with col.batch.fixed_size(batch_size=10) as batch:
            batch.add_object(properties={"t": "a"}, vector=[1.0, 0.0])
            batch.add_object(properties={"t": "b"}, vector=[0.0, 3.0])
        assert col.batch.failed_objects == []
        res = col.query.near_vector(near_vector=[1.0, 1.0], limit=2, return_metadata=MetadataQuery(distance=True))
        assert [(o.properties["t"], o.metadata.distance) for o in res.objects] == [("b", -3.0), ("a", -1.0)]
        cfg = client.collections.get("Dots").config.get()
        assert cfg.vector_config["default"].vector_index_config.distance_metric == VectorDistances.DOT


def test_refusals_are_one_line_errors_through_the_client(weaviate_wire) -> None:
    from weaviate.classes.config import Configure, DataType, Property, StopwordsPreset
    from weaviate.classes.query import Filter
    from weaviate.exceptions import UnexpectedStatusCodeError, WeaviateQueryError

    with _client(weaviate_wire) as client:
        props = [Property(name="t", data_type=DataType.TEXT), Property(name="hidden", data_type=DataType.TEXT, index_searchable=False)]
        col = client.collections.create(
            "Refusals",
            properties=props,
            vector_config=Configure.Vectors.self_provided(),
            inverted_index_config=Configure.inverted_index(stopwords_preset=StopwordsPreset.NONE),
        )
        with pytest.raises(UnexpectedStatusCodeError, match="already exists"):
            client.collections.create("Refusals", properties=props, vector_config=Configure.Vectors.self_provided())
        with pytest.raises(WeaviateQueryError, match="not searchable"):
            col.query.bm25(query="x", query_properties=["hidden"])
        with pytest.raises(WeaviateQueryError, match="no such prop with name 'nope'"):
            col.query.bm25(query="x", query_properties=["nope"])
        with pytest.raises(WeaviateQueryError, match="filters is not modelled by the Weaviate stand-in"):
            col.query.fetch_objects(filters=Filter.by_property("t").equal("x"))
    assert weaviate_wire.db.unmodelled == ["gRPC Search: Search with filters"]
