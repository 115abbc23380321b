"""Reading a user's text file: UTF-8 (an optional BOM accepted), errors naming file and line.

Every reader of a user's text file (configuration TOML, request CSV, trace, model
config.json) decodes through :func:`decode`, so text that is not UTF-8 is reported as
``FILE line N: not UTF-8 text (byte 0xff at column C)`` rather than as a codec message with
neither the file nor the line.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["decode", "loads_untrusted", "open_csv", "read_text"]


def decode(data: bytes, name, error=ValueError) -> str:
    """Decode ``data`` (the bytes of file ``name``) as UTF-8, dropping one leading BOM.

    Raises
    ------
    error
        (``error`` is the caller's exception class) for bytes that are not UTF-8 or a NUL
        byte (a binary file), naming the file, line and column.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(f"{name} line {line}: not UTF-8 text (byte {data[e.start]:#04x} at "
                    f"column {col})") from None
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise error(f"{name} line {line}: NUL byte (a binary file, not text)")
    return text


def read_text(path, what: str, error=ValueError) -> str:
    """Read file ``path`` (described as ``what`` in messages) as UTF-8 text.

    Raises
    ------
    error
        Unreadable file (named, with the reason) or text that is not UTF-8.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except IsADirectoryError:
        raise error(f"cannot read {what} {str(p)!r}: it is a directory") from None
    except OSError as e:
        raise error(f"cannot read {what} {str(p)!r}: {e.strerror}") from None
    return decode(data, p, error)


def open_csv(path, what: str, error=ValueError):
    """Open CSV file ``path`` (``what`` in messages) for a columnar reader.

    Returns ``(fh, head, plain)``: the binary file positioned after its first line, that
    line without a UTF-8 BOM, and whether it is plain ASCII with no quote, NUL or bare CR
    (only then may the columnar fast path read the file; otherwise the caller seeks to 0
    and reads rows through :func:`decode`). The caller closes ``fh``.

    Raises
    ------
    error
        Unreadable file or a directory, named with the reason.
    """
    p = Path(path)
    try:
        fh = p.open("rb")
    except OSError as e:
        raise error(f"cannot read {what} {str(p)!r}: {e.strerror}") from None
    try:
        head = fh.readline()
    except IsADirectoryError:
        fh.close()
        raise error(f"cannot read {what} {str(p)!r}: it is a directory") from None
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    plain = head.isascii() and b'"' not in head and b"\0" not in head \
        and b"\r" not in head.rstrip(b"\r\n")
    return fh, head, plain


def loads_untrusted(text: str):
    """``json.loads`` for text nobody vouches for (a cache entry, a journal line): NaN,
    Infinity and nesting beyond Python's recursion limit are a ValueError naming the
    problem, never a RecursionError traceback.
    """
    import json

    def constant(name):
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
