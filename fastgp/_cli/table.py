"""Numeric columns of a CSV file, with messages that name the problem.

The standard library's :mod:`csv` reads the file (fastgp does not depend on
pandas). A message names the file, the column and the line, so that
``fastgp fit`` can show it as a usage error.
"""

import csv
import math
import os
from dataclasses import dataclass

import numpy as np

__all__ = ["MIN_ROWS", "TableError", "Table", "read_table"]

#: The fewest data rows a GP fit can use (one row has no covariance to learn).
MIN_ROWS = 2

#: Cells read as a missing value (compared case-insensitively, after
#: stripping blanks), besides an empty cell.
MISSING = frozenset({"nan", "na", "n/a", "null", "none"})


class TableError(ValueError):
    """A CSV file that cannot give the columns asked for; the message says
    why and where."""


@dataclass(eq=False)
class Table:
    """A CSV file's header and rows, as strings.

    Parameters
    ----------
    path : str
        The file read (for messages).
    columns : list of str
        The header's names, stripped of blanks, in file order.
    rows : list of (int, list of str)
        Each data row's line number in the file (1-based, the header is line
        1 when it is the first line) and its cells.
    """

    path: str
    columns: list
    rows: list

    @property
    def n_rows(self):
        return len(self.rows)

    def check_columns(self, names):
        """Raise TableError naming every one of ``names`` the header lacks."""
        unknown = [name for name in names if name not in self.columns]
        if unknown:
            listed = ", ".join(repr(name) for name in unknown)
            raise TableError(
                f"unknown column{'s' if len(unknown) > 1 else ''} {listed} in "
                f"{self.path}; its columns are: {', '.join(self.columns)}")

    def numeric(self, names):
        """The columns ``names`` as one float64 array.

        Parameters
        ----------
        names : list of str
            Columns of the header.

        Returns
        -------
        ndarray of shape (n_rows, len(names))
            Row i is the file's i-th data row.

        Raises
        ------
        TableError
            For an unknown column, a cell that is not a number, a missing
            value (an empty cell, NaN, NA, ...) or an infinite one; the
            message gives the column, the first line and how many such cells
            the column holds.
        """
        self.check_columns(names)
        indices = [self.columns.index(name) for name in names]
        values = np.empty((self.n_rows, len(names)), dtype=np.float64)
        for j, (name, index) in enumerate(zip(names, indices)):
            problems = {}  # kind -> (first line, first cell, count)
            for i, (line, cells) in enumerate(self.rows):
                cell = cells[index].strip()
                value, kind = _parse(cell)
                values[i, j] = value
                if kind is not None:
                    first = problems.get(kind, (line, cell, 0))
                    problems[kind] = (first[0], first[1], first[2] + 1)
            if problems:
                raise TableError(_describe(self.path, name, problems))
        return values


def _parse(cell):
    """``(value, problem)``: problem is None, "non-numeric", "missing" or
    "infinite"."""
    if cell == "" or cell.lower() in MISSING:
        return math.nan, "missing"
    try:
        value = float(cell)
    except ValueError:
        return math.nan, "non-numeric"
    if math.isnan(value):
        return value, "missing"
    if math.isinf(value):
        return value, "infinite"
    return value, None


def _describe(path, name, problems):
    # the most serious kind first: a word where a number should be is likely
    # the wrong column, a missing value needs a decision of the user's
    for kind, what, remedy in (
            ("non-numeric", "a non-numeric value",
             "every input and the target must be numbers; leave text columns out "
             "of --inputs"),
            ("missing", "a missing value (NaN or an empty cell)",
             "a GP fit needs every cell; remove or fill in the incomplete rows"),
            ("infinite", "an infinite value",
             "a GP fit needs finite numbers; remove or fix those rows")):
        if kind in problems:
            line, cell, count = problems[kind]
            shown = f" {cell!r}" if kind != "missing" else ""
            more = f" (and {count - 1} more)" if count > 1 else ""
            return (f"column {name!r} of {path} has {what}{shown} on line {line}"
                    f"{more}: {remedy}")
    raise AssertionError(problems)  # pragma: no cover


def read_table(path):
    """Read a comma-separated file with a header line.

    Blank lines are skipped; a UTF-8 byte-order mark (as spreadsheet programs
    write) is dropped.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    Table
        Its header and rows.

    Raises
    ------
    TableError
        If the file cannot be read, has no header, repeats a column name,
        has a row with another number of cells than the header, or has fewer
        than :data:`MIN_ROWS` data rows.
    """
    path = os.fspath(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            lines = list(_numbered(csv.reader(f)))
    except FileNotFoundError:
        raise TableError(f"cannot read {path}: no such file") from None
    except IsADirectoryError:
        raise TableError(f"cannot read {path}: it is a directory, not a CSV file") from None
    except UnicodeDecodeError as exc:
        raise TableError(f"cannot read {path}: not a UTF-8 text file ({exc.reason} "
                         f"at byte {exc.start})") from None
    except csv.Error as exc:
        raise TableError(f"cannot read {path} as CSV: {exc}") from None
    except OSError as exc:
        raise TableError(f"cannot read {path}: {exc.strerror}") from None
    if not lines:
        raise TableError(f"{path} is empty: it needs a header line naming the columns "
                         f"and at least {MIN_ROWS} data rows")
    (_, header), data = lines[0], lines[1:]
    columns = [name.strip() for name in header]
    repeated = sorted({name for name in columns if columns.count(name) > 1})
    if repeated:
        raise TableError(f"{path} names the column{'s' if len(repeated) > 1 else ''} "
                         f"{', '.join(repr(name) for name in repeated)} more than once")
    for line, row in data:
        if len(row) != len(columns):
            raise TableError(f"line {line} of {path} has {len(row)} cells, its header "
                             f"{len(columns)}")
    if len(data) < MIN_ROWS:
        raise TableError(f"{path} has {len(data)} data row{'' if len(data) == 1 else 's'}: "
                         f"a GP fit needs at least {MIN_ROWS}")
    return Table(path, columns, data)


def _numbered(reader):
    """``(line number, row)`` of a csv.reader's non-blank rows; the number
    is the line the row starts on."""
    line = 1
    for row in reader:
        if any(cell.strip() for cell in row):
            yield line, row
        line = reader.line_num + 1
