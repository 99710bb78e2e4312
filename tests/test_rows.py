"""mapper.rows against numpy's row-wise unique and a dict of rows, on keys that fit one int64
and on rows too wide for one (the fallback)."""
import numpy as np
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from mapper.rows import RowIndex, unique_rows


def _tables(high: int):
    shapes = st.tuples(st.integers(0, 40), st.integers(1, 6))
    return shapes.flatmap(lambda s: hnp.arrays(np.int64, s, elements=st.integers(0, high)))


@settings(max_examples=60, deadline=None)
@given(rows=st.one_of(_tables(9), _tables(2 ** 40)))
def test_unique_rows_is_numpys(rows):
    expected, inverse = np.unique(rows, axis=0, return_inverse=True)
    got, got_inverse = unique_rows(rows, return_inverse=True)
    assert np.array_equal(got, expected)
    assert np.array_equal(got_inverse, inverse.reshape(-1))
    assert np.array_equal(unique_rows(rows), expected)


@settings(max_examples=60, deadline=None)
@given(table=st.one_of(_tables(6), _tables(2 ** 40)), data=st.data())
def test_a_row_is_found_where_the_table_has_it(table, data):
    table = np.unique(table, axis=0) if len(table) else table
    # queries: rows of the table, and rows with values beyond its columns' largest
    picks = data.draw(hnp.arrays(np.int64, data.draw(st.integers(0, 30)),
                                 elements=st.integers(0, max(0, len(table) - 1))))
    queries = table[picks] if len(table) else np.zeros((0, table.shape[1]), np.int64)
    queries = np.concatenate([queries, data.draw(hnp.arrays(np.int64, (5, table.shape[1]),
                                                            elements=st.integers(0, 2 ** 41)))])
    index = {tuple(row): i for i, row in enumerate(table.tolist())}
    expected = [index.get(tuple(row), -1) for row in queries.tolist()]
    assert RowIndex(table).find(queries).tolist() == expected


def test_a_row_beyond_a_columns_largest_is_not_mistaken_for_another():
    # the columns' radices are 2 and 3: read as digits, (0, 5) would be key 5, (1, 2)'s
    table = np.array([[1, 2], [0, 1]])
    assert RowIndex(table).find(np.array([[0, 5], [1, 2], [2, 0]])).tolist() == [-1, 0, -1]
