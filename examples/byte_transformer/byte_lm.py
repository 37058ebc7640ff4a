"""The corpus, the model and the evaluation shared by train.py (through geops)
and baseline.py (plain PyTorch).

Corpus: the Jargon File 4.4.7 (Eric S. Raymond, public domain), plain text,
1.68 MB, installed gzipped by the Debian package jargon-text as
/usr/share/doc/jargon-text/jargon.txt.gz (BYTE_LM_CORPUS overrides the file;
a plain or gzipped text file). The model reads it byte by byte: 256 symbols,
no tokenizer.

Split: the file is cut into 4 KiB blocks; every tenth block (blocks 9, 19,
29, ...) is the validation set, the other nine in ten are the training set.
Training blocks are dealt round-robin to the workers (worker r of W gets
training blocks r, r + W, r + 2W, ...), so every worker trains on its own
disjoint shard spread over the whole file.
"""

import gzip
import math
import os

import torch
import torch.nn.functional as F
from torch import nn

CORPUS = os.environ.get("BYTE_LM_CORPUS", "/usr/share/doc/jargon-text/jargon.txt.gz")
BLOCK = 4096          # bytes per split block
VALIDATION_EVERY = 10  # every tenth block is validation


def read_corpus(path=CORPUS):
    """The corpus as a uint8 tensor of its bytes."""
    if not os.path.exists(path):
        raise SystemExit(f"{path} does not exist: install the Debian package jargon-text "
                         "(scripts/setup.sh does) or set BYTE_LM_CORPUS to a text file")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def split(data, rank=0, world=1):
    """(train, validation): this worker's training shard (blocks r, r + W, ...
    of the training blocks, concatenated) and the whole validation set."""
    blocks = list(torch.split(data, BLOCK))
    validation = [b for i, b in enumerate(blocks) if i % VALIDATION_EVERY == VALIDATION_EVERY - 1]
    training = [b for i, b in enumerate(blocks) if i % VALIDATION_EVERY != VALIDATION_EVERY - 1]
    return torch.cat(training[rank::world]), torch.cat(validation)


def batches(train, batch_size, context, seed):
    """Endless (input, target) batches of `batch_size` windows of `context`
    bytes at random offsets of `train`; the target is the input shifted by one."""
    g = torch.Generator().manual_seed(seed)
    while True:
        starts = torch.randint(0, len(train) - context - 1, (batch_size,), generator=g)
        windows = torch.stack([train[s:s + context + 1] for s in starts.tolist()]).long()
        yield windows[:, :-1], windows[:, 1:]


class ByteTransformer(nn.Module):
    """A small GPT-style language model over bytes: byte and position
    embeddings, pre-norm transformer layers (nn.TransformerEncoderLayer) under
    a causal mask, a final LayerNorm and a linear map to the 256 next-byte
    logits. The default (5 layers, d_model 128, 4 heads, feed-forward 512,
    context 128) has 1,073,792 parameters."""

    def __init__(self, layers=5, d_model=128, heads=4, feedforward=512, context=128):
        super().__init__()
        self.context = context
        self.embed = nn.Embedding(256, d_model)
        self.position = nn.Parameter(torch.zeros(context, d_model))
        nn.init.normal_(self.position, std=0.02)
        # One nn.TransformerEncoderLayer per layer, each initialised on its own
        # (nn.TransformerEncoder would start every layer as a copy of one).
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=feedforward, dropout=0.0,
                                       activation="gelu", batch_first=True, norm_first=True)
            for _ in range(layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 256)
        # mask[i, j] = -inf where j > i: position i sees bytes 0..i only.
        self.register_buffer("mask", torch.triu(torch.full((context, context), float("-inf")), diagonal=1),
                             persistent=False)

    def forward(self, x):
        """x: [batch, length] byte values -> [batch, length, 256] logits."""
        length = x.shape[1]
        h = self.embed(x) + self.position[:length]
        mask = self.mask[:length, :length]
        for layer in self.layers:
            h = layer(h, src_mask=mask)
        return self.head(self.norm(h))


def loss_of(model, x, y):
    """Mean cross-entropy (nats per byte) of predicting y from x."""
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1))


@torch.no_grad()
def bits_per_byte(model, data, context, limit=None, batch_size=32):
    """Mean cross-entropy in bits per byte over the non-overlapping windows of
    `context` bytes of `data`, or over `limit` of them evenly spread over
    `data` when given. The same windows in every run, so figures compare."""
    model.eval()
    windows = (len(data) - 1) // context
    chosen = range(windows)
    if limit is not None and limit < windows:
        chosen = [i * windows // limit for i in range(limit)]
    total, count = 0.0, 0
    for first in range(0, len(chosen), batch_size):
        starts = [i * context for i in chosen[first:first + batch_size]]
        w = torch.stack([data[s:s + context + 1] for s in starts]).long()
        logits = model(w[:, :-1])
        total += F.cross_entropy(logits.reshape(-1, 256), w[:, 1:].reshape(-1), reduction="sum").item()
        count += w[:, 1:].numel()
    model.train()
    return total / count / math.log(2)


def learning_rate(step, steps, peak, warmup_fraction=0.05, final_fraction=0.1):
    """Linear warm-up over the first warmup_fraction of `steps`, then a
    half-cosine decay to final_fraction * peak at `steps`."""
    warmup = max(1, int(warmup_fraction * steps))
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return peak * (final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress)))


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())
