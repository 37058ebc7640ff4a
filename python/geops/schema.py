"""The tables of a PyTorch model: one per named parameter.

Every entry of ``model.named_parameters()`` is a table of the parameter
server, named like the parameter (``"fc1.weight"``), float32, row-major, with
the tensor's elements in their own order. The shape maps to (rows, cols):

  0-d and 1-D tensors  -> (numel, 1)
  N-D tensors          -> (shape[0], numel // shape[0])

so chunks (runs of whole rows) split a weight matrix between output units.

``tables_of`` is the one place the model's schema is read; ``views`` gives the
numpy arrays that share the tensors' memory, which the extension reads and
writes in place (no copy through Python).
"""

from collections import namedtuple

import torch

from .errors import InvalidArgumentError

Table = namedtuple("Table", ["name", "param", "rows", "cols"])


def table_shape(shape):
    """(rows, cols) of a tensor shape (see module doc)."""
    numel = 1
    for d in shape:
        numel *= int(d)
    if len(shape) <= 1:
        return numel, 1
    rows = int(shape[0])
    return rows, (numel // rows if rows else 0)


def check_tensor(name, tensor):
    """Raises InvalidArgumentError naming the parameter when geops cannot use it in place."""
    if tensor.dtype != torch.float32:
        raise InvalidArgumentError(
            f"parameter '{name}' is {tensor.dtype}; geops tables are float32 (use model.float())")
    if tensor.device.type != "cpu":
        raise InvalidArgumentError(
            f"parameter '{name}' is on {tensor.device}; the geops Python client works on CPU tensors")
    if not tensor.is_contiguous():
        raise InvalidArgumentError(f"parameter '{name}' is not contiguous")
    if tensor.numel() == 0:
        raise InvalidArgumentError(f"parameter '{name}' has no elements")


def tables_of(model):
    """The model's tables, in ``named_parameters()`` order.

    Raises InvalidArgumentError for a model without parameters or with a
    parameter that is not a contiguous float32 CPU tensor.
    """
    tables = []
    for name, param in model.named_parameters():
        check_tensor(name, param)
        rows, cols = table_shape(param.shape)
        tables.append(Table(name, param, rows, cols))
    if not tables:
        raise InvalidArgumentError("the model has no parameters")
    return tables


def views(tables):
    """numpy arrays sharing the memory of each table's tensor, checked again
    (a model may have been moved or cast since ``tables_of``)."""
    out = []
    for t in tables:
        check_tensor(t.name, t.param)
        out.append(t.param.detach().numpy())
    return out
