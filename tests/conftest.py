import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture
def float64():
    """Run a test with float64 as the default dtype (for 1e-9 identities)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)
