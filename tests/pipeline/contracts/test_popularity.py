"""Smoothed item popularity, on rows small enough to check by hand."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.contracts import features as F
from pipeline.contracts.popularity import ItemPopularity, read_window

pytestmark = pytest.mark.unit


def test_rates_shrink_towards_the_window_rate_and_unseen_items_get_it():
    pop = ItemPopularity.fit(np.array([5, 5, 9, 9]), np.array([1, 1, 0, 0]), prior_weight=2.0)
    assert pop.window_rate == 0.5
    # item 5: (2 clicks + 2 x 0.5) / (2 shown + 2) = 0.75; item 9: (0 + 1) / 4; item 7: never shown
    assert pop(np.array([5, 9, 7, 100])).tolist() == [0.75, 0.25, 0.5, 0.5]
    with pytest.raises(ValueError, match="no training rows"):
        ItemPopularity.fit(np.array([]), np.array([]))


def test_read_window_leaves_out_labels_that_are_not_clicks_or_not(tmp_path):
    pq.write_table(pa.table({F.ITEM_ID: [1, 1, 2, 2], F.LABEL: pa.array([1, None, 2, 0], pa.int64())}),
                   tmp_path / "part-0.parquet")
    pop = read_window([tmp_path / "part-0.parquet"])
    assert pop.window_rate == 0.5 and pop.item_ids.tolist() == [1, 2]
