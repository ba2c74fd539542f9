"""On-disk layout of a sweep: manifest, chunk files, final results, all written atomically.

::

    DIR/manifest.json          spec (canonical), its SHA-256, jaxdp version, shape, chunking
    DIR/chunks/000000.npz      one file per finished chunk: one 1-D array per quantity
    DIR/results.npz            the final result (see :func:`write_results`)
    DIR/results.csv            optional long table
    DIR/.lock                  advisory lock held by the running process

Every file is written to a temporary name in the same directory, flushed with ``fsync`` and
renamed into place, so a file that exists is complete: a killed run loses at most the chunk it
was computing. A file damaged afterwards (by a full disk, a copy cut short, a hand edit) is
detected from its headers: an unreadable chunk counts as not done and is computed again, an
unreadable ``results.npz`` is rebuilt, and an unreadable manifest is an error naming it.
"""

from __future__ import annotations

import array
import contextlib
import datetime
import fcntl
import json
import os
import re
import struct
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from jaxdp._checks import error_line
from jaxdp.sweep.grid import canonical_value
from jaxdp.sweep.spec import spec_digest

__all__ = ["Store"]

FORMAT = "jaxdp-sweep/1"
MANIFEST = "manifest.json"
CHUNKS = "chunks"
RESULTS = "results.npz"
CSV = "results.csv"
LOCK = ".lock"
_TMP = re.compile(r"^\..+\.tmp\.\d+$")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write ``path`` via a temporary file in the same directory, fsync and rename."""
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)


def _write_header(f: IO[bytes], header: dict) -> None:
    try:
        np.lib.format.write_array_header_1_0(f, header)
    except ValueError:  # header longer than 64 KiB: format 2.0
        np.lib.format.write_array_header_2_0(f, header)


def _current_form(spec: Any) -> Any:
    """A manifest's canonical spec as this version writes it: manifests written before fixed
    grid values were canonicalised (:func:`~jaxdp.sweep.grid.canonical_value`) hold an
    integer fixed value as written (``{"name": "sensitivity", "value": 1}``)."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("grid"), list):
        return spec
    return {**spec, "grid": [_current_entry(g) for g in spec["grid"]]}


def _current_entry(entry: Any) -> Any:
    if isinstance(entry, Mapping) and "value" in entry:
        return {**entry, "value": canonical_value(entry["value"])}
    return entry


def _same_spec(old: Mapping, new: Mapping) -> bool:
    """Whether the manifest ``old`` is of the sweep ``new`` (a manifest from this version, or
    an older one whose spec, unaltered since, reads the same in the current form)."""
    digest = old.get("spec_sha256")
    if digest == new["spec_sha256"]:
        return True
    spec = old.get("spec")  # (JSON data: it dumps again)
    return digest == spec_digest(spec) and spec_digest(_current_form(spec)) == new["spec_sha256"]


def _describe_difference(old: Mapping, new: Mapping) -> str:
    # compared as JSON text, as the digest is, in the current form (the old manifest's fixed
    # value 1 is this version's 1.0), and shown as the manifest has it
    def same(a, b):
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)

    def entries(spec):  # (a hand-edited manifest may hold anything: no traceback)
        grid = spec.get("grid") if isinstance(spec, Mapping) else None
        return (
            {g.get("name"): g for g in grid if isinstance(g, Mapping)}
            if isinstance(grid, list)
            else {}
        )

    if not isinstance(old, Mapping):
        return f"its manifest's spec is a JSON {type(old).__name__}"
    current = _current_form(old)
    for key in ("mechanism", "quantities", "dtype", "grid"):
        if not same(current.get(key), new.get(key)):
            if key == "grid":
                a, b = entries(current), entries(new)
                for name in list(a) + [n for n in b if n not in a]:
                    if not same(a.get(name), b.get(name)):
                        there, here = (_grid_entry(g.get(name)) for g in (entries(old), b))
                        return f"grid parameter '{name}' differs: {there} there, {here} here"
                return "grid order differs"
            return f"{key} differs: {old.get(key)!r} there, {new.get(key)!r} here"
    return "spec differs"


def _grid_entry(entry: Mapping | None) -> str:
    if entry is None:
        return "absent"
    kind, value = next(((k, v) for k, v in entry.items() if k != "name"), ("?", None))
    return json.dumps(value) if kind == "value" else f"{kind} {json.dumps(value)}"


class Store:
    """The output directory of one sweep (used by process 0 only)."""

    def __init__(self, out_dir: str | os.PathLike) -> None:
        self.root = Path(out_dir)
        self.chunks = self.root / CHUNKS
        self._lock_fd: int | None = None

    # ----------------------------------------------------------------- lifecycle

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold an exclusive advisory lock on the directory (released even on SIGKILL).

        A sweep refused (or interrupted) before its manifest was written leaves the directory
        as it found it: the lock file and the directories created for it are removed again
        (a refused sweep left a new, empty ``--out`` holding a ``.lock``); nothing that existed
        before is touched.
        """
        if self.root.exists() and not self.root.is_dir():  # (mkdir said "[Errno 17] File exists")
            raise ValueError(f"{self.root} is a file, not a directory; use a new --out")
        lock = self.root / LOCK
        for _ in range(3):
            made = []  # the directories mkdir creates, deepest first
            for d in (self.root, *self.root.parents):
                if os.path.lexists(d):
                    break
                made.append(d)
            try:  # (was OSError's "[Errno 2] No such file or directory: '/proc/x/.lock'")
                self.root.mkdir(parents=True, exist_ok=True)
                created = not lock.exists()
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise ValueError(
                    f"cannot use {os.fspath(self.root)!r} as the output directory (--out): "
                    f"{e.strerror or error_line(e)}"
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise ValueError(
                    f"{self.root} is in use by another running jaxdp sweep; wait for it to finish"
                ) from None
            # the lock file of a refused sweep is removed (below) while a process that had
            # opened it may still lock it: that lock holds the unlinked file, not .lock
            try:
                if os.path.samestat(os.fstat(fd), os.stat(lock)):
                    break
            except OSError:
                pass
            os.close(fd)
        else:  # pragma: no cover - three refused sweeps in a row raced this one
            raise ValueError(
                f"{self.root} is in use by another running jaxdp sweep; wait for it to finish"
            )
        try:
            self._clean_tmp()
            yield
        finally:
            if created and not (self.root / MANIFEST).exists():  # (never a sweep: refused)
                with contextlib.suppress(OSError):
                    lock.unlink()
                for d in made:  # (only while empty: rmdir removes nothing else)
                    if d.name not in ("", ".", ".."):  # (out/.. is not one we made)
                        with contextlib.suppress(OSError):
                            d.rmdir()
            os.close(fd)

    def _clean_tmp(self) -> None:
        for d in (self.root, self.chunks):
            if d.is_dir():
                for p in d.iterdir():
                    if _TMP.match(p.name):
                        with contextlib.suppress(OSError):
                            p.unlink()

    def read_manifest(self) -> dict | None:
        """The manifest, or ``None`` if there is none.

        Raises:
            ValueError: the manifest exists but is not a JSON object (one line, naming it).
        """
        path = self.root / MANIFEST
        if not path.exists():
            return None
        try:
            with open(path, encoding="utf-8") as f:
                manifest = json.load(f)
        except (OSError, ValueError) as e:  # (JSONDecodeError, UnicodeDecodeError: ValueError)
            why = error_line(e)
            raise ValueError(
                f"{path} is damaged ({why}); it is not a jaxdp sweep manifest: use a new --out"
            ) from None
        if not isinstance(manifest, dict):
            raise ValueError(
                f"{path} is damaged (a JSON {type(manifest).__name__}, not an object); it is "
                "not a jaxdp sweep manifest: use a new --out"
            )
        return manifest

    def prepare(self, manifest: dict, *, explicit_chunk_size: bool) -> dict:
        """Create the directory and manifest, or check that an existing one is this sweep.

        Returns:
            The manifest in force (the existing one when resuming: its chunk size wins unless a
            different one was asked for explicitly, which is an error).

        Raises:
            ValueError: the directory holds something else, or a sweep of a different spec,
                jaxdp version or (explicit) chunk size.
        """
        old = self.read_manifest()
        if old is None:
            others = [
                p.name for p in self.root.iterdir() if p.name != LOCK and not _TMP.match(p.name)
            ]
            if others:
                raise ValueError(
                    f"{self.root} is not empty and holds no jaxdp sweep (no {MANIFEST}); "
                    "use a new --out"
                )
            manifest = dict(manifest, created=datetime.datetime.now(datetime.UTC).isoformat())
            atomic_write(
                self.root / MANIFEST,
                lambda f: f.write((json.dumps(manifest, indent=2) + "\n").encode()),
            )
            self._make_chunks()
            return manifest
        if old.get("format") != FORMAT:
            raise ValueError(
                f"{self.root} holds a sweep in format {old.get('format')!r}, not {FORMAT!r}; "
                "use a new --out"
            )
        if not _same_spec(old, manifest):
            diff = _describe_difference(old.get("spec", {}), manifest["spec"])
            raise ValueError(
                f"{self.root} holds a sweep of a different spec ({diff}); use a new --out"
            )
        if old.get("jaxdp_version") != manifest["jaxdp_version"]:
            raise ValueError(
                f"{self.root} was started with jaxdp {old.get('jaxdp_version')}, this is jaxdp "
                f"{manifest['jaxdp_version']}; finish it with that version or use a new --out"
            )
        for key in ("chunk_size", "block_size"):  # (hand-edited: 0 divided by zero, -5 wrote
            # empty arrays as results, 'abc' failed in int() without naming the file)
            value = old.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"{self.root / MANIFEST} is damaged ({key} is {value!r}, not a positive "
                    "integer); restore it or use a new --out"
                )
        if explicit_chunk_size and old.get("chunk_size") != manifest["chunk_size"]:
            raise ValueError(
                f"{self.root} was written with chunk_size={old.get('chunk_size')}, not "
                f"{manifest['chunk_size']}; resume without a chunk size (--chunk-size, "
                "chunk_size=) or use a new --out"
            )
        self._make_chunks()
        return old

    def _make_chunks(self) -> None:
        if self.chunks.exists() and not self.chunks.is_dir():  # (mkdir said "[Errno 17] File
            # exists: '.../chunks'")
            raise ValueError(f"{self.chunks} is a file, not the chunk directory; remove it")
        self.chunks.mkdir(exist_ok=True)

    # ----------------------------------------------------------------- chunks

    @staticmethod
    def _width(n_chunks: int) -> int:
        return max(6, len(str(max(n_chunks - 1, 0))))

    def chunk_path(self, index: int, n_chunks: int) -> Path:
        return self.chunks / f"{index:0{self._width(n_chunks)}d}.npz"

    def done_runs(
        self, n_chunks: int, problem: Callable[[int, Path], str | None] | None = None
    ) -> tuple[np.ndarray, list[tuple[Path, str]]]:
        """The chunks already on disk, as runs of consecutive indices.

        Memory is proportional to the chunk files present (8 bytes each while listing them),
        never to ``n_chunks``; the result is one ``[start, stop)`` row per run of consecutive
        finished chunks (one row for a sweep interrupted once).

        Args:
            n_chunks: number of chunks of the sweep (files beyond it are ignored).
            problem: ``problem(index, path)`` returns why a chunk file is unusable, or ``None``;
                unusable files do not count as done.

        Returns:
            ``(runs, damaged)``: ``runs`` an int64 array shaped ``(m, 2)``, sorted; ``damaged``
            the ``(path, why)`` of every unusable chunk file.
        """
        found = array.array("q")
        damaged: list[tuple[Path, str]] = []
        if self.chunks.is_dir():
            pattern = re.compile(r"^(\d+)\.npz$")
            width = self._width(n_chunks)
            with os.scandir(self.chunks) as entries:
                for entry in entries:
                    m = pattern.match(entry.name)
                    if not (m and len(m.group(1)) == width and int(m.group(1)) < n_chunks):
                        continue
                    index = int(m.group(1))
                    why = None if problem is None else problem(index, Path(entry.path))
                    if why is None:
                        found.append(index)
                    else:
                        damaged.append((Path(entry.path), why))
        done = np.sort(np.frombuffer(found, dtype=np.int64)) if found else np.zeros(0, np.int64)
        del found
        if not done.size:
            return np.zeros((0, 2), dtype=np.int64), damaged
        breaks = np.flatnonzero(np.diff(done) != 1) + 1
        starts = np.concatenate([done[:1], done[breaks]])
        stops = np.concatenate([done[breaks - 1], done[-1:]]) + 1
        return np.stack([starts, stops], axis=1), damaged

    def chunk_problem(self, path: Path, lengths: Mapping[str, int]) -> str | None:
        """Why the chunk file ``path`` cannot be used (from its headers), or ``None``.

        Args:
            path: a chunk file.
            lengths: quantity -> the number of values the chunk must hold.
        """
        try:
            headers = npz_headers(path)
        except ValueError as e:
            return str(e)
        for q, length in lengths.items():
            if q not in headers:
                return f"no array '{q}'"
            shape, dtype = headers[q]
            if shape != (length,):
                return f"'{q}' has shape {shape}, expected ({length},)"
            if dtype.kind not in "biuf":
                return f"'{q}' has dtype {dtype}, not a number"
        return None

    def write_chunk(self, index: int, n_chunks: int, arrays: Mapping[str, np.ndarray]) -> None:
        atomic_write(self.chunk_path(index, n_chunks), lambda f: np.savez(f, **arrays))

    def read_chunk(self, index: int, n_chunks: int, name: str, length: int) -> np.ndarray:
        """One quantity of a finished chunk.

        Raises:
            ValueError: the file is missing or damaged (one line naming it and the remedy).
        """
        path = self.chunk_path(index, n_chunks)
        try:
            with np.load(path, allow_pickle=False) as z:
                a = z[name]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            why = error_line(e)
            raise ValueError(
                f"{path} is damaged ({why}); delete it and run the sweep again to recompute it"
            ) from None
        if a.shape != (length,):
            raise ValueError(
                f"{path} is damaged ({name} has shape {a.shape}, expected ({length},)); delete "
                "it and run the sweep again to recompute it"
            )
        return a

    # ----------------------------------------------------------------- results

    @property
    def results_path(self) -> Path:
        return self.root / RESULTS

    def results_problem(self, quantities: Sequence[str], shape: tuple[int, ...]) -> str | None:
        """Why ``results.npz`` cannot be used, or ``None``: its headers, then every member's
        CRC (bytes changed inside the values passed the headers, so a rerun kept a file that
        :func:`load_sweep` refused)."""
        try:
            headers = npz_headers(self.results_path)
            with zipfile.ZipFile(self.results_path) as zf:
                bad = zf.testzip()
        except ValueError as e:
            return str(e)
        except (OSError, EOFError, zipfile.BadZipFile) as e:
            return error_line(e)
        if bad is not None:
            return f"Bad CRC-32 for file {bad!r}"
        for name in ("_axes", "_fixed", "_quantities"):
            if name not in headers:
                return f"no array '{name}'"
        for q in quantities:
            if q not in headers:
                return f"no array '{q}'"
            if headers[q][0] != tuple(shape):
                return f"'{q}' has shape {headers[q][0]}, expected {tuple(shape)}"
        return None

    def write_results(
        self,
        *,
        quantities: Sequence[str],
        dtypes: Mapping[str, Any],
        shape: tuple[int, ...],
        coords: Mapping[str, np.ndarray],
        fixed: Mapping[str, np.ndarray],
        chunk_size: int,
        n_chunks: int,
    ) -> None:
        """Stream the chunk files into ``results.npz`` (bounded memory: one chunk at a time).

        The npz holds, uncompressed: one array per quantity, shaped ``shape`` (the grid, in spec
        order); one 1-D coordinate array per axis; one 0-d array per fixed parameter; and the
        string arrays ``_axes``, ``_fixed`` and ``_quantities`` listing those names in order.
        """
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1

        def write(f: IO[bytes]) -> None:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                for q in quantities:
                    with zf.open(q + ".npy", "w", force_zip64=True) as member:
                        _write_header(
                            member,
                            {
                                "descr": np.lib.format.dtype_to_descr(np.dtype(dtypes[q])),
                                "fortran_order": False,
                                "shape": tuple(shape),
                            },
                        )
                        for i in range(n_chunks):
                            length = min(chunk_size, n - i * chunk_size)
                            a = self.read_chunk(i, n_chunks, q, length)
                            member.write(np.ascontiguousarray(a, dtype=dtypes[q]).data)
                extra = dict(coords)
                extra.update(fixed)
                extra["_axes"] = np.asarray(list(coords), dtype=str)
                extra["_fixed"] = np.asarray(list(fixed), dtype=str)
                extra["_quantities"] = np.asarray(list(quantities), dtype=str)
                for name, a in extra.items():
                    with zf.open(name + ".npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, np.asarray(a), allow_pickle=False)

        atomic_write(self.results_path, write)

    def write_csv(
        self,
        *,
        quantities: Sequence[str],
        axis_names: Sequence[str],
        points: Callable[[np.ndarray], Mapping[str, np.ndarray]],
        n_points: int,
        chunk_size: int,
        n_chunks: int,
        float_fmt: str,
        stored: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        """Write ``results.csv``: one row per point, columns = axes then quantities, read from
        the chunk files, or from ``stored`` (each quantity flat, in point order) if given."""

        def write(f: IO[bytes]) -> None:
            f.write((",".join([*axis_names, *quantities]) + "\n").encode())
            for i in range(n_chunks):
                start = i * chunk_size
                stop = min(start + chunk_size, n_points)
                cols = list(points(np.arange(start, stop)).values())
                if stored is None:
                    cols += [self.read_chunk(i, n_chunks, q, stop - start) for q in quantities]
                else:
                    cols += [stored[q][start:stop] for q in quantities]
                exact = [np.issubdtype(c.dtype, np.integer) or c.dtype == bool for c in cols]
                fmts = ["%d" if e else float_fmt for e in exact]
                # (integers as Python ints: through float64, 2**53 + 1 was written ...992)
                table = np.column_stack(
                    [
                        c.astype(object if e else np.float64)
                        for c, e in zip(cols, exact, strict=True)
                    ]
                )
                np.savetxt(f, table, fmt=fmts, delimiter=",")

        atomic_write(self.root / CSV, write)


# --------------------------------------------------------------------------- reading


def _npy_header(f: IO[bytes], what: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` from the ``.npy`` header at ``f``'s position.

    Raises:
        ValueError: the array holds Python objects (``what`` names it).
    """
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    if dtype.hasobject:
        raise ValueError(f"{what} holds Python objects")
    return shape, fortran, dtype


def npz_headers(path: str | os.PathLike) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """``name -> (shape, dtype)`` of every member of an ``.npz``, reading only the headers.

    Raises:
        ValueError: the file cannot be read as an npz of plain arrays (one line, the reason).
    """
    out: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                name = info.filename.removesuffix(".npy")
                with zf.open(info) as member:
                    shape, _, dtype = _npy_header(member, f"'{name}'")
                out[name] = (tuple(shape), dtype)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        why = error_line(e)
        raise ValueError(why) from None
    return out


def npz_memmap(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Memory-map every member of an uncompressed ``.npz`` (read-only)."""
    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
        for info in zf.infolist():
            name = info.filename.removesuffix(".npy")
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"{path}: member {name} is compressed; cannot memory-map it")
            f.seek(info.header_offset)
            local = f.read(30)
            name_len, extra_len = struct.unpack("<HH", local[26:30])
            f.seek(info.header_offset + 30 + name_len + extra_len)
            shape, fortran, dtype = _npy_header(f, f"{path}: member {name}")
            if int(np.prod(shape)) * dtype.itemsize < 2**20:  # small: just read it
                with zf.open(info.filename) as member:
                    out[name] = np.lib.format.read_array(member, allow_pickle=False)
                continue
            out[name] = np.memmap(
                path,
                dtype=dtype,
                mode="r",
                offset=f.tell(),
                shape=shape,
                order="F" if fortran else "C",
            )
    return out
