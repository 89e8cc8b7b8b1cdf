"""The CPU vocabulary head in slices (engines/kept_logits.py): the same values as one matmul, to
the last bit on one thread; on two, MKL may cut one matmul and its slices differently and round a
logit in its last bits (seen at a 3k-row head; the bundled models' 49k and 262k rows agreed)."""

from collections.abc import Iterator

import pytest
import torch

from ptfactory.engines.kept_logits import HEAD_CHUNK, chunk_head


class _Model(torch.nn.Module):
    def __init__(self, vocab: int, bias: bool) -> None:
        super().__init__()
        self.head = torch.nn.Linear(64, vocab, bias=bias)

    def get_output_embeddings(self) -> torch.nn.Linear:
        return self.head


@pytest.fixture(params=[1, 2])
def threads(request: pytest.FixtureRequest) -> Iterator[int]:
    """torch's thread count for the test (not what an earlier test left), restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(1, 64), (3, 1, 64), (5, 7, 64), (40, 64)])
def test_sliced_head_gives_the_same_logits(shape: tuple[int, ...], bias: bool, threads: int) -> None:
    torch.manual_seed(0)
    model = _Model(3 * HEAD_CHUNK + 17, bias)  # a last slice shorter than the others
    x = torch.randn(*shape)
    with torch.inference_mode():
        whole = model.head(x)
        chunk_head(model)
        sliced = model.head(x)
    assert sliced.shape == whole.shape
    if threads == 1:
        assert torch.equal(sliced, whole)
    else:  # within float32 rounding of the same dot product
        torch.testing.assert_close(sliced, whole, rtol=1e-6, atol=1e-6)


def test_a_head_narrower_than_a_slice_is_left_alone() -> None:
    model = _Model(HEAD_CHUNK, False)
    chunk_head(model)
    assert "forward" not in vars(model.head)
