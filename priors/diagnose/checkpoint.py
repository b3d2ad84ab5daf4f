"""Read a local Hugging Face checkpoint without torch: ``config.json`` and named tensors.

Nothing is downloaded: the path is a directory holding ``config.json`` (and optionally
weights) or a ``config.json`` file itself. Weights are looked up in the usual file names,
sharded or not::

    model.safetensors, model.safetensors.index.json      (read with safetensors' numpy API)
    pytorch_model.bin, pytorch_model.bin.index.json      (needs torch: imported only then)

Only the tensors asked for are read (``Checkpoint.tensor``), by key; ``Checkpoint.keys``
lists the stored names without reading data, and ``Checkpoint.files_read`` says which
files had tensor data read. Every safetensors header is checked against its file's size
(a truncated file is refused before anything is read), and every file a weight index names
must lie inside the model directory. bfloat16 tensors, which numpy has no type for, are
widened exactly to float32 (a bfloat16 is the top 16 bits of a float32), so every stored
number reaches the caller unchanged. A ``config.json`` holding ``NaN`` or ``Infinity``
(not JSON, though Python's parser reads them) is refused naming the key. Every failure is
a ``ValueError`` naming the file (the command line turns it into one line and exit
status 2).
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from priors.diagnose.config import INSTALL_HINT, nonfinite_paths

__all__ = ["Checkpoint", "load_checkpoint"]

_SAFETENSORS = ("model.safetensors", "model.safetensors.index.json")
_PYTORCH = ("pytorch_model.bin", "pytorch_model.bin.index.json")
_NP_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


#: Largest JSON file read (a config is kilobytes; ``/dev/zero`` must not be read forever).
_JSON_LIMIT = 64 * 2**20


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path, "rb") as fh:
            data = fh.read(_JSON_LIMIT + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {what} {path!r}: {exc.strerror}") from exc
    if len(data) > _JSON_LIMIT:
        raise ValueError(f"{what} {path!r} is larger than {_JSON_LIMIT} bytes")
    try:
        value = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"{what} {path!r} is not valid JSON: {exc}") from exc
    bad = nonfinite_paths(value)
    if bad:
        raise ValueError(f"{what} {path!r}: {bad[0]} is not a finite number (NaN and "
                         "Infinity are not JSON)")
    return value


def _safetensors_header(path: str) -> dict[str, Any]:
    """The JSON header of a safetensors file (8-byte little-endian length, then JSON),
    checked against the file: the tensors' byte ranges must cover the data exactly (a
    truncated or padded file is refused here, before any tensor is read)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(8)
            if len(raw) != 8:
                raise ValueError(f"{path!r} is not a safetensors file (truncated header)")
            (size,) = struct.unpack("<Q", raw)
            if size > 100 * 2**20:
                raise ValueError(f"{path!r} is not a safetensors file (header of {size} bytes)")
            header = json.loads(fh.read(size))
            file_size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise ValueError(f"cannot read {path!r}: {exc.strerror}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"{path!r} is not a safetensors file (bad header)") from exc
    if not isinstance(header, dict):
        raise ValueError(f"{path!r} is not a safetensors file (bad header)")
    header.pop("__metadata__", None)
    end = 0
    for key, info in header.items():
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
                or not 0 <= offsets[0] <= offsets[1]):
            raise ValueError(f"{path!r} is not a safetensors file (tensor {key!r} has no "
                             "valid data_offsets)")
        end = max(end, offsets[1])
    data = file_size - 8 - size
    if data < end:
        raise ValueError(f"{path!r} is truncated: its header describes {end} bytes of "
                         f"tensor data, the file holds {max(data, 0)}")
    if data > end:
        raise ValueError(f"{path!r} is not a valid safetensors file: {data - end} bytes "
                         "after the last tensor")
    return header


def _read_bf16(path: str, header: dict[str, Any], key: str) -> np.ndarray:
    """A bfloat16 tensor widened exactly to float32 (bits shifted into the top half)."""
    info = header[key]
    begin, end = info["data_offsets"]
    shape = tuple(int(s) for s in info["shape"])
    with open(path, "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        fh.seek(8 + size + begin)
        raw = fh.read(end - begin)
    bits = np.frombuffer(raw, dtype="<u2")
    if bits.size != int(np.prod(shape)):
        raise ValueError(f"{path!r}: tensor {key!r} is truncated")
    return (bits.astype(np.uint32) << 16).view(np.float32).reshape(shape)


@dataclass
class Checkpoint:
    """``config`` (the parsed ``config.json``), ``path`` and the weight files found.

    ``weight_map`` maps each stored tensor name to its file (empty without weights);
    ``format`` is ``"safetensors"``, ``"pytorch"`` or ``None``. A single-file
    ``pytorch_model.bin`` lists its keys only once loaded (with torch), on first use.
    """

    path: str
    config: dict[str, Any]
    format: str | None = None
    weight_map: dict[str, str] = field(default_factory=dict)
    pending_bin: str | None = None
    files_read: set[str] = field(default_factory=set)
    _headers: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _torch_files: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def has_weights(self) -> bool:
        return bool(self.weight_map) or self.pending_bin is not None

    @property
    def weight_files(self) -> list[str]:
        if self.pending_bin is not None:
            return [self.pending_bin]
        return sorted(set(self.weight_map.values()))

    def keys(self) -> list[str]:
        """Stored tensor names (loads a single-file ``pytorch_model.bin`` with torch)."""
        if self.pending_bin is not None:
            state = self._torch_state(self.pending_bin)
            self.files_read.add(self.pending_bin)
            self.weight_map = {k: self.pending_bin for k in state}
            self.pending_bin = None
        return list(self.weight_map)

    def tensor(self, key: str) -> np.ndarray:
        """The stored tensor ``key`` as a numpy array (values exactly as stored)."""
        self.keys()
        if key not in self.weight_map:
            raise ValueError(f"tensor {key!r} is not in the checkpoint {self.path!r}")
        file = self.weight_map[key]
        self.files_read.add(file)
        if self.format == "pytorch":
            t = self._torch_state(file).get(key)
            if t is None:
                raise ValueError(f"tensor {key!r} is not in {file!r}")
            t = t.detach()
            # float64 stays float64; float32/16/bfloat16 widen exactly to float32
            return (t.double() if t.dtype.itemsize == 8 else t.float()).numpy()
        header = self._headers[file]
        dtype = header[key].get("dtype")
        if dtype == "BF16":
            try:
                return _read_bf16(file, header, key)
            except (OSError, KeyError, TypeError, struct.error) as exc:
                raise ValueError(f"cannot read tensor {key!r} from {file!r}: {exc}") from exc
        if dtype not in _NP_DTYPES:
            raise ValueError(f"{file!r}: tensor {key!r} has unsupported dtype {dtype}")
        try:
            from safetensors import safe_open

            with safe_open(file, framework="numpy") as fh:
                return np.asarray(fh.get_tensor(key))
        except ImportError as exc:

            raise ValueError(
                f"reading safetensors weights needs the safetensors package ({INSTALL_HINT})"
            ) from exc
        except Exception as exc:  # safetensors raises its own error types on broken files
            raise ValueError(f"cannot read tensor {key!r} from {file!r}: {exc}") from exc

    def _torch_state(self, file: str) -> dict[str, Any]:
        if file not in self._torch_files:
            try:
                import torch
            except ImportError as exc:

                raise ValueError(
                    f"{file!r} is a PyTorch checkpoint: reading it needs torch "
                    f"({INSTALL_HINT}), or convert it to safetensors"
                ) from exc
            try:
                state = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
            except Exception as exc:  # torch raises many types for a broken file
                raise ValueError(f"cannot read PyTorch checkpoint {file!r}: {exc}") from exc
            if not isinstance(state, dict):
                raise ValueError(f"{file!r} does not hold a state dict")
            self._torch_files[file] = state
        return self._torch_files[file]


def _inside(directory: str, name: object, index: str) -> str:
    """The file ``name`` of a weight index: a relative name that stays inside
    ``directory`` (no absolute path, no ``..`` out of it) and is a regular file. The name
    is what is checked, not where a link at it points: in the Hugging Face cache every file
    of a snapshot directory is a link to ``../../blobs/<hash>``, as the index files are."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ValueError(f"weight index {index!r} names an invalid file {name!r}")
    norm = os.path.normpath(name)
    if (os.path.isabs(name) or os.path.splitdrive(name)[0] or norm == os.pardir
            or norm.startswith(os.pardir + os.sep)):
        raise ValueError(f"weight index {index!r} names {name!r}, outside the model "
                         "directory: refused")
    full = os.path.join(directory, norm)
    if not os.path.isfile(full):  # missing, or a FIFO or device that must not be read
        raise ValueError(f"weight index {index!r} names {name!r}, which is not a regular file")
    return full


def _weights(directory: str) -> tuple[str | None, dict[str, str], dict[str, dict[str, Any]]]:
    single, index = (os.path.join(directory, n) for n in _SAFETENSORS)
    if os.path.isfile(index) or os.path.isfile(single):
        headers: dict[str, dict[str, Any]] = {}
        weight_map: dict[str, str] = {}
        if os.path.isfile(index):
            idx = _read_json(index, "safetensors index")
            wm = idx.get("weight_map") if isinstance(idx, dict) else None
            if not isinstance(wm, dict):
                raise ValueError(f"safetensors index {index!r} has no weight_map")
            files = {_inside(directory, f, index) for f in wm.values()}
        else:
            files = {single}
        for file in sorted(files):
            header = _safetensors_header(file)
            headers[file] = header
            for key in header:
                weight_map[key] = file
        return "safetensors", weight_map, headers
    single, index = (os.path.join(directory, n) for n in _PYTORCH)
    if os.path.isfile(index):
        idx = _read_json(index, "PyTorch index")
        wm = idx.get("weight_map") if isinstance(idx, dict) else None
        if not isinstance(wm, dict):
            raise ValueError(f"PyTorch index {index!r} has no weight_map")
        return "pytorch", {k: _inside(directory, f, index) for k, f in wm.items()}, {}
    if os.path.isfile(single):
        return "pytorch", {}, {}
    return None, {}, {}


def load_checkpoint(path: str) -> Checkpoint:
    """The checkpoint at ``path`` (a directory with ``config.json``, or a ``config.json``)."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a file or directory name, got {path!r}")
    path = os.fspath(path)
    if os.path.isdir(path):
        directory, config_file = path, os.path.join(path, "config.json")
        if not os.path.isfile(config_file):
            raise ValueError(f"{path!r} has no config.json")
    elif os.path.isfile(path):
        directory, config_file = None, path
    else:
        raise ValueError(f"{path!r}: no such file or directory")
    config = _read_json(config_file, "config")
    if not isinstance(config, dict):
        raise ValueError(f"config {config_file!r} is not a JSON object")
    ckpt = Checkpoint(path=path, config=config)
    if directory is not None:
        fmt, weight_map, headers = _weights(directory)
        ckpt.format, ckpt.weight_map, ckpt._headers = fmt, weight_map, headers
        if fmt == "pytorch" and not weight_map:
            ckpt.pending_bin = os.path.join(directory, _PYTORCH[0])
    return ckpt
