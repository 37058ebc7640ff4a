"""The tables of a PyTorch model: one per named parameter, then one per
floating-point buffer.

Every entry of ``model.named_parameters()`` is a table of the parameter
server, named like the parameter (``"fc1.weight"``), float32, row-major, with
the tensor's elements in their own order. With ``buffers=True`` every
floating-point entry of ``model.named_buffers()`` (BatchNorm's running_mean
and running_var) follows, a table too, marked ``buffer``: the session
averages those over every worker instead of summing their changes
(geops/session.py). Integer buffers (BatchNorm's num_batches_tracked, used
only with momentum=None) stay local. The shape maps to (rows, cols):

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

Table = namedtuple("Table", ["name", "param", "rows", "cols", "buffer"], defaults=[False])


def table_shape(shape):
    """(rows, cols) of a tensor shape (see module doc)."""
    numel = 1
    for d in shape:
        numel *= int(d)
    if len(shape) <= 1:
        return numel, 1
    rows = int(shape[0])
    return rows, (numel // rows if rows else 0)


def check_tensor(name, tensor, what="parameter"):
    """Raises InvalidArgumentError naming the parameter (or buffer) when geops cannot use it in place."""
    if tensor.dtype != torch.float32:
        raise InvalidArgumentError(
            f"{what} '{name}' is {tensor.dtype}; geops tables are float32 (use model.float())")
    if tensor.device.type != "cpu":
        raise InvalidArgumentError(
            f"{what} '{name}' is on {tensor.device}; the geops Python client works on CPU tensors")
    if not tensor.is_contiguous():
        raise InvalidArgumentError(f"{what} '{name}' is not contiguous")
    if tensor.numel() == 0:
        raise InvalidArgumentError(f"{what} '{name}' has no elements")


def tables_of(model, buffers=False):
    """The model's tables, in ``named_parameters()`` order, then (with
    ``buffers``) its floating-point buffers in ``named_buffers()`` order.

    Raises InvalidArgumentError for a model without parameters or with a
    parameter or floating-point buffer that is not a contiguous float32 CPU
    tensor.
    """
    tables = []
    for name, param in model.named_parameters():
        check_tensor(name, param)
        rows, cols = table_shape(param.shape)
        tables.append(Table(name, param, rows, cols))
    if not tables:
        raise InvalidArgumentError("the model has no parameters")
    if buffers:
        for name, buf in model.named_buffers():
            if not buf.is_floating_point():
                continue
            check_tensor(name, buf, "buffer")
            rows, cols = table_shape(buf.shape)
            tables.append(Table(name, buf, rows, cols, True))
    return tables


def views(tables):
    """numpy arrays sharing the memory of each table's tensor, checked again
    (a model may have been moved or cast since ``tables_of``)."""
    out = []
    for t in tables:
        check_tensor(t.name, t.param, "buffer" if t.buffer else "parameter")
        out.append(t.param.detach().numpy())
    return out
