"""The one loop over query points in chunks: every prediction that holds an
(n_train, chunk) block at a time (the mean and variance of each solver, the
classifier's latent moments, the GPLVM's predictive density) takes its
chunks here, so that its extra memory is O(n_train x chunk), not
O(n_train x n_query).
"""

__all__ = ["CHUNK_BYTES", "chunk_rows", "query_chunks"]

#: Bytes of the (n_train, chunk) float64 block that a prediction holds at once.
CHUNK_BYTES = 64 * 2**20


def chunk_rows(n_train, chunk_bytes=None):
    """Query rows per chunk so that an (n_train, chunk) float64 block fits in
    ``chunk_bytes`` (default: :data:`CHUNK_BYTES`, read at call time so that
    it can be changed after import); at least 1."""
    if chunk_bytes is None:
        chunk_bytes = CHUNK_BYTES
    return max(1, int(chunk_bytes // (8 * max(n_train, 1))))


def query_chunks(n_query, n_train, chunk_bytes=None):
    """The slices of ``range(n_query)`` taken in turn: consecutive, in order,
    each of :func:`chunk_rows` rows but the last."""
    step = chunk_rows(n_train, chunk_bytes)
    for start in range(0, n_query, step):
        yield slice(start, min(n_query, start + step))
