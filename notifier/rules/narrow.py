"""Narrow columns: int64 values held as int32 (or narrower) codes, exactly.

A window store of a million rows holds a few dozen int64 values per row: offsets, which on a
partition stay within a few billion of each other for weeks, and times, which every row a scan
saw shares with the others. A :class:`NarrowColumn` keeps each value as a small code, either
``value - base``, where ``base`` is shared by a group of columns (:class:`Bases`: one per row,
e.g. every offset a row holds) or is 0, or the index of the value in a :class:`Dictionary` of
the distinct values many columns hold (a store's scan times). Reading gives the int64 (or the
declared dtype, e.g. a :class:`WholeFloat`) values back, the same for every input:

* the column's fill value (NULL, an unset time) has a code of its own, whatever the base;
* a value whose code does not fit first moves the row's base near it, when the row's other
  values in this column still fit against the new one (an offset that grew 2^31 past the base);
  the other columns of the group are re-encoded against the new base, and any of their rows
  that no longer fit are spilled; a dictionary that has run out of codes first frees those no
  row holds any more;
* a row that still does not fit (an offset reset on a huge partition, two values 2^31 apart in
  one window, offsets near 2^63, more distinct times alive than a dictionary has codes) is
  **spilled**: its codes say so and its exact values are kept aside, in a dict, until a later
  write makes it fit again.

So memory depends on how typical the data is, and the values never do. A column reads like a
numpy array (``column[rows]``, ``column[rows, -1]``, ``column[row, j]``; the result is a copy)
and is written the same way, plus :meth:`NarrowColumn.push` (drop the oldest entry of each row,
append the newest) for the right-aligned windows of :mod:`notifier.rules.store`.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

_GROWTH = 2
"""Entries a growing column holds more at a time."""

_FIRST_CODES = 64
"""Codes a :class:`Dictionary` makes room for at first (it doubles as it hands out more)."""

_CHUNK = 1 << 16
"""Rows re-encoded at a time on the slow paths (a first scan rebases every row): bounds the
int64 temporaries."""


class WholeFloat(np.float64):
    """The dtype to declare a float64 column with whose values are whole numbers (lengths of
    time in ms, differences of two int64 times): it is held as int32 codes, and reads give
    float64 back. A value that is not whole (or -0.0, or beyond the codes) spills its row,
    exact."""


class ColumnReader(Protocol):
    """What reads a store column by row (and entry): a numpy array, a :class:`NarrowColumn`,
    the newest entries of a window."""

    def __getitem__(self, key: Any, /) -> Any: ...


class Bases:
    """One base per row, shared by the :class:`NarrowColumn` s that hold codes against it
    (they register themselves).

    A base is a multiple of 2^31, held as its int32 multiple (4 bytes a row, not 8): an int32
    code against the nearest one reaches at least 2^30 either side of a value, and some base
    holds any values of a row spread over less than 2^31. Values beyond ±2^62 have no base
    (their rows spill)."""

    STEP_BITS = 31

    def __init__(self) -> None:
        self.units = np.zeros(0, dtype=np.int32)
        self.columns: list[NarrowColumn] = []

    @property
    def nbytes(self) -> int:
        return int(self.units.nbytes)

    def of(self, index: slice | np.ndarray) -> np.ndarray:
        """The int64 bases of the rows at ``index``."""
        return self.units[index].astype(np.int64) << self.STEP_BITS

    def nearest(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The base nearest each of ``values``, and whether it can be held."""
        units = (values >> self.STEP_BITS) + ((values >> (self.STEP_BITS - 1)) & 1)
        info = np.iinfo(self.units.dtype)
        held = (units >= info.min) & (units <= info.max)
        return np.where(held, units, 0) << self.STEP_BITS, held

    def resize(self, capacity: int) -> None:
        grown = np.zeros(capacity, dtype=self.units.dtype)
        kept = min(capacity, self.units.size)
        grown[:kept] = self.units[:kept]
        self.units = grown

    def rebase(self, rows: np.ndarray, new_base: np.ndarray, keep: NarrowColumn | None) -> None:
        """Move ``rows`` (unique) to ``new_base`` (from :meth:`nearest`), re-encoding every
        column but ``keep`` (the caller writes that one's rows itself); rows that no longer fit
        are spilled."""
        others = [c for c in self.columns if c is not keep]
        for start in range(0, rows.size, _CHUNK):
            part = rows[start : start + _CHUNK]
            values = [c.read_rows(part) for c in others]
            self.units[part] = new_base[start : start + _CHUNK] >> self.STEP_BITS
            for column, kept_values in zip(others, values, strict=True):
                column.write_rows(part, kept_values, rebase=False)


class Dictionary:
    """Distinct int64 values shared by many columns, whose codes index them: the scan times a
    store holds. A scan stamps every row it sees with the same time, so a million windows of
    ten samples hold a few dozen distinct times, not ten million; a code of 2 bytes names one
    of 65,535 of them, where a code against a per-row base needs 4 and the base 8 more.

    Code 0 says spilled (a :class:`NarrowColumn` keeps such a row's exact values aside); each
    column's fill value is an entry pinned for good. An entry no column refers to any more is
    collected when the codes run out, and a value that still finds no code spills its row:
    every value reads back exactly, whatever the data. ``size``: how many codes (all that
    ``code`` can name by default; fewer run out sooner, as the tests make them).
    """

    SPILLED = 0

    def __init__(self, code: Any = np.uint16, size: int | None = None) -> None:
        self.code = np.dtype(code)
        if self.code.kind != "u":
            raise ValueError(f"dictionary codes must be unsigned, not {self.code}")
        most = int(np.iinfo(self.code).max) + 1
        size = most if size is None else size
        if not 2 <= size <= most:
            raise ValueError(f"a dictionary of {self.code} holds 2 to {most} codes, not {size}")
        self.size = size
        held = min(size, _FIRST_CODES)
        self.values = np.zeros(held, dtype=np.int64)
        """Code → value (what decoding gathers from), as far as codes were handed out."""
        self._used = np.zeros(held, dtype=np.bool_)
        self._pinned = np.zeros(held, dtype=np.bool_)
        self._next = self.SPILLED + 1
        """Codes from here on were never handed out."""
        self._freed = np.zeros(0, dtype=np.int64)
        """Codes a collection freed, the next one handed out last."""
        self._keys = np.zeros(0, dtype=np.int64)
        self._key_codes = np.zeros(0, dtype=np.int64)
        self._stale = False
        self._handed: list[np.ndarray] = []
        """The codes handed out by the :meth:`encode` under way: not stored yet, not free."""
        self.columns: list[NarrowColumn] = []

    @property
    def nbytes(self) -> int:
        arrays = (self.values, self._used, self._pinned, self._freed, self._keys, self._key_codes)
        return sum(int(a.nbytes) for a in arrays)

    def pin(self, value: int) -> int:
        """The code of ``value``, never collected (a column's fill)."""
        try:
            codes, fits = self._lookup(np.asarray([value], dtype=np.int64))
        finally:
            self._handed.clear()
        if not fits[0]:
            raise ValueError(f"no code left for the fill value {value}")
        code = int(codes[0])
        self._pinned[code] = True
        return code

    def encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The code of each of ``values`` (int64, any shape), and whether it has one (new values
        get one while codes last)."""
        try:
            return self._encode(values)
        finally:
            self._handed.clear()

    def _encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        flat = values.reshape(-1)
        codes = np.zeros(flat.size, dtype=self.code)
        fits = np.ones(flat.size, dtype=np.bool_)
        # Most writes hold one or two distinct values (this scan's time, an unset one): peeled
        # off by comparison, without sorting the rest.
        where: np.ndarray | None = None
        left = flat
        for _ in range(4):
            if left.size == 0:
                return codes.reshape(values.shape), fits.reshape(values.shape)
            value = left[:1]
            hit = left == value[0]
            code, fit = self._lookup(value)
            at = hit if where is None else where[hit]
            codes[at] = code[0]
            fits[at] = fit[0]
            where = np.flatnonzero(~hit) if where is None else where[~hit]
            left = flat[where]
        if left.size:
            distinct, inverse = np.unique(left, return_inverse=True)
            code, fit = self._lookup(distinct)
            assert where is not None
            codes[where] = code[inverse.reshape(-1)]
            fits[where] = fit[inverse.reshape(-1)]
        return codes.reshape(values.shape), fits.reshape(values.shape)

    def _lookup(self, distinct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Codes of ``distinct`` values (no repeats), new ones added while codes last."""
        found, codes = self._find(distinct)
        missing = np.flatnonzero(~found)
        if missing.size > self._available():
            self.collect()
            found, codes = self._find(distinct)
            missing = np.flatnonzero(~found)
        fits = found.copy()
        if missing.size:
            taken = missing[: self._available()]
            new = self._take(taken.size)
            self.values[new] = distinct[taken]
            self._used[new] = True
            self._stale = True
            codes[taken] = new
            fits[taken] = True
        self._handed.append(codes[fits])
        return codes.astype(self.code), fits

    def _available(self) -> int:
        return int(self._freed.size) + self.size - self._next

    def _take(self, count: int) -> np.ndarray:
        """``count`` codes not in use: freed ones first, then new ones (the arrays grow)."""
        reused = min(count, self._freed.size)
        codes = self._freed[self._freed.size - reused :][::-1]
        self._freed = self._freed[: self._freed.size - reused]
        fresh = np.arange(self._next, self._next + count - reused, dtype=np.int64)
        self._next += fresh.size
        if self._next > self.values.size:
            held = min(self.size, max(self._next, 2 * self.values.size))
            for name in ("values", "_used", "_pinned"):
                old = getattr(self, name)
                grown = np.zeros(held, dtype=old.dtype)
                grown[: old.size] = old
                setattr(self, name, grown)
        return np.concatenate([codes, fresh])

    def _find(self, distinct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._stale:
            held = np.flatnonzero(self._used)
            order = np.argsort(self.values[held], kind="stable")
            self._keys, self._key_codes = self.values[held][order], held[order]
            self._stale = False
        if self._keys.size == 0:
            return np.zeros(distinct.size, np.bool_), np.zeros(distinct.size, np.int64)
        at = np.minimum(np.searchsorted(self._keys, distinct), self._keys.size - 1)
        found = self._keys[at] == distinct
        return found, np.where(found, self._key_codes[at], self.SPILLED)

    def collect(self) -> None:
        """Free the codes no column refers to (pinned ones, and those the encoding under way
        handed out, are kept)."""
        referenced = self._pinned[: self._next].copy()
        referenced[self.SPILLED] = True
        for handed in self._handed:
            referenced[handed] = True
        for column in self.columns:
            flat = column.codes.reshape(-1)
            for start in range(0, flat.size, _CHUNK * 16):
                referenced[flat[start : start + _CHUNK * 16]] = True
        self._used[: self._next] = referenced
        self._used[self.SPILLED] = False
        self._freed = np.flatnonzero(~referenced)[::-1].astype(np.int64)
        self._stale = True


class NarrowColumn:
    """A ``(capacity,)`` or ``(capacity, width)`` column of integers held as narrow codes.

    ``fill``: the value of a new or freed row (has a code of its own). ``bases``: the per-row
    bases the codes are against (None: 0). ``dtype``: what reads give (the logical type);
    ``code``: what is stored. ``grows``: hold only the newest entries any row has filled (the
    older ones are all ``fill``, and are not held until some row needs them): a LEO table
    fills its points over its first scans, and an idle partition's never fills.
    """

    def __init__(
        self,
        name: str,
        width: int | None,
        fill: int,
        dtype: Any = np.int64,
        code: Any = np.int32,
        bases: Bases | None = None,
        grows: bool = False,
        dictionary: Dictionary | None = None,
    ) -> None:
        self.name = name
        self.width = width
        self.held = width if width is None or not grows else min(width, _GROWTH)
        """Entries held per row: the newest ``held`` of ``width`` (the rest are ``fill``)."""
        self.dtype = np.dtype(dtype)
        self._whole = self.dtype.kind == "f"
        """Float values held as codes when whole."""
        self._work = np.dtype(np.float64 if self._whole else np.int64)
        """What values are written as: their exact type."""
        self.fill: Any = float(fill) if self._whole else int(fill)
        if self._whole and not (float(fill).is_integer() and bases is None):
            raise ValueError(f"column {name!r}: a whole float column needs a whole fill, no base")
        self.code = np.dtype(code)
        info = np.iinfo(self.code)
        self._fill_code = int(info.min)
        self._spilled_code = int(info.min) + 1
        self._low = int(info.min) + 2
        self._high = int(info.max)
        self.bases = bases
        if bases is not None:
            bases.columns.append(self)
        self.dictionary = dictionary
        if dictionary is not None:
            if bases is not None or self.dtype != np.int64:
                raise ValueError(f"column {name!r}: a dictionary holds int64 values, no base")
            self.code = dictionary.code
            self._fill_code = dictionary.pin(int(self.fill))
            self._spilled_code = Dictionary.SPILLED
            dictionary.columns.append(self)
        self.codes = np.zeros((0,) if self.held is None else (0, self.held), dtype=self.code)
        self.spilled: dict[int, Any] = {}
        """Row → its exact values (an int, or an int64 array of ``width``)."""

    # ------------------------------------------------------------------ numpy-like surface

    @property
    def shape(self) -> tuple[int, ...]:
        rows = int(self.codes.shape[0])
        return (rows,) if self.width is None else (rows, self.width)

    @property
    def nbytes(self) -> int:
        """The codes, and the spilled rows' exact values (the bases are counted once, by
        whoever owns them)."""
        per_spilled = 8 * (self.width or 1)
        return int(self.codes.nbytes) + per_spilled * len(self.spilled)

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def resize(self, capacity: int) -> None:
        shape = (capacity,) if self.held is None else (capacity, self.held)
        grown = np.full(shape, self._fill_code, dtype=self.code)
        kept = min(capacity, self.codes.shape[0])
        grown[:kept] = self.codes[:kept]
        self.codes = grown
        for row in [r for r in self.spilled if r >= capacity]:
            del self.spilled[row]

    def __getitem__(self, key: Any) -> Any:
        index, slot = _split(key)
        if isinstance(index, (int, np.integer)):
            return self._read(np.asarray([int(index)]), slot)[0]
        return self._read(index, slot)

    def __setitem__(self, key: Any, value: Any) -> None:
        index, slot = _split(key)
        single = isinstance(index, (int, np.integer))
        rows = self._rows(np.asarray([int(index)]) if single else index)
        if rows.size == 0:
            return
        scalar = np.ndim(value) == 0
        if slot is None or self.width is None:
            if scalar and self._is_fill(np.asarray(value, self._work)):
                self._fill_rows(rows)
                return
            values = np.asarray(value, dtype=self._work)
            if single and not scalar:
                values = values.reshape((1, *values.shape))
            self.write_rows(rows, np.broadcast_to(values, (rows.size, *self.shape[1:])))
        elif isinstance(slot, (int, np.integer)):
            values = np.broadcast_to(np.asarray(value, self._work), rows.shape)
            self._set_slot(rows, int(slot), values)
        else:
            current = self.read_rows(rows)
            current[:, slot] = value
            self.write_rows(rows, current)

    def _set_slot(self, rows: np.ndarray, slot: int, values: np.ndarray) -> None:
        """One entry of each of ``rows`` (unique): in place where the code fits, else the row is
        written whole."""
        logical = slot
        if self.held != self.width:
            assert self.width is not None and self.held is not None
            slot %= self.width
            logical = slot
            if slot < self.width - self.held and (values != self.fill).any():
                self._hold(self.width - slot)
            if slot < self.width - self.held:
                current = self.read_rows(rows)
                current[:, slot] = values
                self.write_rows(rows, current)
                return
            slot -= self.width - self.held
        base = np.zeros(rows.size, np.int64) if self.bases is None else self.bases.of(rows)
        codes, fits = self._codes_against(values, base)
        fits &= self.codes[rows, slot] != self._spilled_code
        self.codes[rows[fits], slot] = codes[fits]
        slow = ~fits
        if slow.any():
            current = self.read_rows(rows[slow])
            current[:, logical] = values[slow]
            self.write_rows(rows[slow], current)

    def newest(self, rows: slice | np.ndarray, entries: int) -> np.ndarray:
        """The newest ``entries`` of each of ``rows`` (a LEO table's filled points, without
        decoding the ones no row of ``rows`` uses)."""
        assert self.width is not None and self.held is not None
        entries = min(entries, self.width)
        logical = slice(self.width - entries, None)
        if entries <= self.held:
            return self._read_codes(rows, slice(self.held - entries, None), logical=logical)
        size = len(self._rows(rows)) if isinstance(rows, slice) else rows.size
        out = np.full((size, entries), self.fill, dtype=self.dtype)
        held = self._read_codes(rows, slice(None), logical=slice(self.width - self.held, None))
        out[:, entries - self.held :] = held
        return out

    def take(self, rows: np.ndarray, slots: np.ndarray | int) -> np.ndarray:
        """The entry at ``slots`` (one per row, or the same) of each of ``rows``."""
        return self._read(np.asarray(rows), slots)

    # ------------------------------------------------------------------ reading

    def _rows(self, index: slice | np.ndarray) -> np.ndarray:
        if isinstance(index, slice):
            return np.arange(*index.indices(self.codes.shape[0]), dtype=np.int64)
        rows = np.asarray(index)
        if rows.dtype == np.bool_:
            return np.flatnonzero(rows)
        return rows.astype(np.int64, copy=False).reshape(-1)

    def _read(self, index: slice | np.ndarray, slot: Any) -> np.ndarray:
        if self.held != self.width and slot is not None and not isinstance(slot, slice):
            return self._read_unheld(index, slot)
        if self.held != self.width:
            padded = self._pad(self._read_held(index))
            return padded if slot is None else padded[:, slot]
        return self._read_held(index) if slot is None else self._read_codes(index, slot)

    def _read_held(self, index: slice | np.ndarray) -> np.ndarray:
        return self._read_codes(index, None)

    def _pad(self, held: np.ndarray) -> np.ndarray:
        """Rows of held entries (spilled ones already whole) as rows of ``width``."""
        assert self.width is not None and self.held is not None
        if held.ndim == 2 and held.shape[1] == self.width:
            return held
        out = np.full((held.shape[0], self.width), self.fill, dtype=held.dtype)
        out[:, self.width - self.held :] = held
        return out

    def _read_unheld(self, index: slice | np.ndarray, slot: Any) -> np.ndarray:
        """Entries at ``slot`` (of ``width``) when only the newest ``held`` are held."""
        assert self.width is not None and self.held is not None
        physical = np.asarray(slot) % self.width - (self.width - self.held)
        codes = self.codes[index, np.maximum(physical, 0)]
        out = self._read_codes(index, np.maximum(physical, 0), logical=np.asarray(slot))
        unheld = np.broadcast_to((physical < 0) & (codes != self._spilled_code), out.shape)
        out[unheld] = self.fill
        return out

    def _read_codes(self, index: slice | np.ndarray, slot: Any, logical: Any = None) -> np.ndarray:
        codes = self.codes[index] if slot is None else self.codes[index, slot]
        if self.dictionary is not None:
            out = self.dictionary.values[codes]
            if self.spilled:
                spilled = codes == self._spilled_code
                if spilled.any():
                    self._unspill_read(index, slot if logical is None else logical, out, spilled)
            return out
        if self.bases is None:
            out = codes.astype(self.dtype)
        else:
            base = self.bases.of(index)
            out = np.add(codes, base.reshape(base.shape + (1,) * (codes.ndim - base.ndim)),
                         dtype=np.int64)  # fmt: skip
        if codes.size and codes.min() < self._low:
            np.putmask(out, codes == self._fill_code, self.fill)
            if self.spilled:  # else no code says spilled: no need to look
                spilled = codes == self._spilled_code
                if spilled.any():
                    where = slot if logical is None else logical
                    self._unspill_read(index, where, out, spilled)
        return out if out.dtype == self.dtype else out.astype(self.dtype)

    def _unspill_read(self, index: Any, slot: Any, out: np.ndarray, spilled: np.ndarray) -> None:
        rows = self._rows(index)
        where = np.flatnonzero(spilled.any(axis=1) if spilled.ndim == 2 else spilled)
        many = isinstance(slot, np.ndarray) and slot.ndim == 1 and slot.size == rows.size
        for i in where.tolist():
            exact = self.spilled[int(rows[i])]
            if self.width is None or slot is None:
                out[i] = exact[self.width - out.shape[1] :] if self.width else exact
            else:
                out[i] = exact[slot[i]] if many else exact[slot]

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        """The exact int64 values of ``rows`` (whole rows)."""
        out = self._read(rows, None)
        return out.astype(self._work, copy=False)

    # ------------------------------------------------------------------ writing

    def _forget_spilled(self, rows: np.ndarray) -> None:
        """Drop the exact values kept aside for any of ``rows`` (about to be written)."""
        if self.spilled:
            first = self.codes[rows] if self.width is None else self.codes[rows, 0]
            for row in rows[first == self._spilled_code].tolist():
                del self.spilled[row]

    def _fill_rows(self, rows: np.ndarray) -> None:
        self._forget_spilled(rows)
        self.codes[rows] = self._fill_code

    def write_rows(self, rows: np.ndarray, values: np.ndarray, rebase: bool = True) -> None:
        """Set whole rows (``rows`` unique) to ``values``, exactly."""
        for start in range(0, rows.size, _CHUNK):
            self._write_chunk(rows[start : start + _CHUNK], values[start : start + _CHUNK], rebase)

    def _write_chunk(self, rows: np.ndarray, values: np.ndarray, rebase: bool) -> None:
        values = np.asarray(values).astype(self._work, copy=False)
        if self.held != self.width:
            assert self.width is not None and self.held is not None
            used = (values != self.fill).any(axis=0)
            if used.any():
                self._hold(self.width - int(np.argmax(used)))
        self._forget_spilled(rows)
        codes, fits = self._encode(rows, values)
        self.codes[rows[fits]] = codes[fits]
        misfit = ~fits
        if not misfit.any():
            return
        rows, values = rows[misfit], values[misfit]
        if rebase and self.bases is not None:
            candidate, held = self.bases.nearest(self._middle(values))
            movable = (
                held & self._fits_against(values, candidate) & (values != self.fill).any(axis=-1)
            )
            if movable.any():
                self.bases.rebase(rows[movable], candidate[movable], keep=self)
                codes, fits = self._encode(rows, values)
                self.codes[rows[fits]] = codes[fits]
                rows, values = rows[~fits], values[~fits]
        for row, exact in zip(rows.tolist(), values, strict=True):
            self.spilled[row] = exact.item() if self.width is None else exact.copy()
        self.codes[rows] = self._spilled_code

    def _encode(self, rows: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Codes of whole rows of ``values`` for ``rows`` (their held entries), and which rows
        fit."""
        base = np.zeros(rows.size, np.int64) if self.bases is None else self.bases.of(rows)
        if self.held != self.width:
            assert self.width is not None and self.held is not None
            values = values[:, self.width - self.held :]
        if self.dictionary is not None:
            return self._dictionary_codes(rows, values)
        return self._codes_against(values, base)

    def _dictionary_codes(
        self, rows: np.ndarray, values: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`_encode`, looking up only the values that differ from what ``rows`` hold
        (an evidence column written whole each scan changes in a few rows)."""
        assert self.dictionary is not None
        codes = self.codes[rows]
        kept = (self.dictionary.values[codes] == values) & (codes != self._spilled_code)
        changed = ~kept
        if changed.any():
            new, fits = self.dictionary.encode(values[changed])
            codes[changed] = new
            fit = np.ones(values.shape, dtype=np.bool_)
            fit[changed] = fits
            return codes, _whole_rows(fit)
        return codes, np.ones(rows.size, dtype=np.bool_)

    def _hold(self, entries: int) -> None:
        """Hold at least the newest ``entries`` of each row (a few more at a time)."""
        assert self.width is not None and self.held is not None
        if entries <= self.held:
            return
        held = min(self.width, max(entries, self.held + _GROWTH))
        grown = np.full((self.codes.shape[0], held), self._fill_code, dtype=self.code)
        grown[:, held - self.held :] = self.codes
        self.codes, self.held = grown, held

    def _codes_against(self, values: np.ndarray, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.dictionary is not None:
            codes, fits = self.dictionary.encode(values)
            return codes, _whole_rows(fits)
        b = base.reshape(base.shape + (1,) * (values.ndim - base.ndim))
        # int64 arithmetic wraps the same way both ways: base + (value - base) is value even
        # when the difference wrapped, so the range is all a code needs.
        with np.errstate(over="ignore"):
            delta = values - b
        is_fill = self._is_fill(values)
        fits = (delta >= self._low) & (delta <= self._high)
        if self._whole:
            fits &= (values == np.trunc(values)) & ~((values == 0) & np.signbit(values))
        fits |= is_fill
        codes = np.where(is_fill, self._fill_code, np.where(fits, delta, 0)).astype(self.code)
        row_fits = fits.all(axis=1) if fits.ndim == 2 else fits
        return codes, row_fits

    def _is_fill(self, values: np.ndarray) -> np.ndarray:
        """Which of ``values`` are the fill (a whole float's sign too: -0.0 is not 0.0)."""
        same: np.ndarray = np.asarray(values == self.fill)
        if self._whole:
            same &= np.signbit(values) == np.signbit(self.fill)
        return same

    def _fits_against(self, values: np.ndarray, base: np.ndarray) -> np.ndarray:
        return self._codes_against(values, base)[1]

    def _middle(self, values: np.ndarray) -> np.ndarray:
        """The middle of each row's values other than the fill (the base a misfit moves near)."""
        if values.ndim == 1:
            return values
        real = values != self.fill
        low = np.where(real, values, np.iinfo(np.int64).max).min(axis=1)
        high = np.where(real, values, np.iinfo(np.int64).min).max(axis=1)
        middle: np.ndarray = (low >> 1) + (high >> 1)
        return middle

    def push(self, index: slice | np.ndarray, newest: Any) -> None:
        """Drop the oldest entry of each row at ``index`` (2-D columns) and put ``newest`` last."""
        if self.held != self.width and (self.codes[index, 0] != self._fill_code).any():
            assert self.held is not None
            self._hold(self.held + 1)
        rows_codes = self.codes[index]
        was_spilled = rows_codes[:, -1] == self._spilled_code
        _shift_left(self.codes, index)
        newest_values = np.broadcast_to(np.asarray(newest, dtype=self._work),
                                        rows_codes.shape[:1])  # fmt: skip
        base = np.zeros(1, np.int64) if self.bases is None else self.bases.of(index)
        codes, fits = self._codes_against(newest_values, np.broadcast_to(base, newest_values.shape))
        fits &= ~was_spilled
        self.codes[index, -1] = np.where(fits, codes, self._spilled_code)
        slow = ~fits
        if not slow.any():
            return
        rows = self._rows(index)[slow]
        # The misfits and the spilled: their whole rows, shifted, with the newest appended.
        full = np.empty((rows.size, self.width or 1), dtype=self._work)
        spilled_rows = was_spilled[slow]
        if (~spilled_rows).any():
            plain = rows[~spilled_rows]
            self.codes[plain, -1] = self._fill_code
            full[~spilled_rows] = self.read_rows(plain)
        for i in np.flatnonzero(spilled_rows).tolist():
            exact = self.spilled[int(rows[i])]
            full[i, :-1] = exact[1:]
        full[:, -1] = newest_values[slow]
        self.write_rows(rows, full)


def _whole_rows(fits: np.ndarray) -> np.ndarray:
    """Which rows fit whole (a 1-D column's entries are its rows)."""
    return np.asarray(fits.all(axis=1)) if fits.ndim == 2 else fits


def _split(key: Any) -> tuple[Any, Any]:
    if isinstance(key, tuple):
        if len(key) != 2:
            raise IndexError(f"a narrow column takes [rows] or [rows, slot], not {key!r}")
        return key[0], key[1]
    return key, None


def _shift_left(codes: np.ndarray, index: slice | np.ndarray) -> None:
    """Move each row at ``index`` left by one entry, in place (a run of rows as one block)."""
    if isinstance(index, slice) and codes.flags.c_contiguous:
        flat = codes[index].view()
        flat.shape = (-1,)
        if flat.size:
            flat[:-1] = flat[1:]
    else:
        codes[index, :-1] = codes[index, 1:]


class RowsOf:
    """The rows ``index`` of a narrow column, read only where asked: ``view[:, j]`` and
    ``view[positions, slots]`` decode those entries, never the whole rows (Burrow's kernel
    reads two times of each commit ring)."""

    __slots__ = ("_column", "_index")

    def __init__(self, column: NarrowColumn, index: slice | np.ndarray) -> None:
        self._column = column
        self._index = index

    def __getitem__(self, key: tuple[Any, Any]) -> np.ndarray:
        positions, slots = key
        if isinstance(positions, slice) and positions == slice(None):
            return np.asarray(self._column[self._index, slots])
        rows = self._column._rows(self._index)[positions]
        return self._column.take(rows, slots)


__all__ = ["Bases", "ColumnReader", "Dictionary", "NarrowColumn", "RowsOf", "WholeFloat"]
