"""Reading the raw logs of a results folder, plain or gzipped.

A run writes its event log (events.jsonl), per-worker metrics (*.jsonl) and
process logs (*.log) as plain text; the copies kept under
experiments/results are gzipped in place (events.jsonl.gz, x.log.gz). The
readers here take the plain name and open whichever is there, the plain
file first (a fresh run), else the same name with .gz.
"""
import glob
import gzip
import os


def find(path):
    """path if it exists, else path + '.gz' if that exists, else None."""
    if os.path.exists(path):
        return path
    if not path.endswith(".gz") and os.path.exists(path + ".gz"):
        return path + ".gz"
    return None


def exists(path):
    """Whether path or path + '.gz' exists."""
    return find(path) is not None


def open_text(path):
    """path opened for reading text: the plain file, else its .gz (gunzipped
    as it is read). Raises FileNotFoundError, naming the plain path, when
    neither is there."""
    found = find(path)
    if found is None:
        raise FileNotFoundError("no such file: %s (nor %s.gz)" % (path, path))
    if found.endswith(".gz"):
        return gzip.open(found, "rt")
    return open(found)


def read_text(path):
    """The whole text of path or of its .gz."""
    with open_text(path) as f:
        return f.read()


def glob_plain(pattern):
    """The plain names of the files that match pattern either as they are or
    gzipped (pattern + '.gz'), sorted; each name is given once, so
    open_text() of it reads the plain file where both are there."""
    names = set(glob.glob(pattern))
    names.update(p[:-3] for p in glob.glob(pattern + ".gz"))
    return sorted(names)
