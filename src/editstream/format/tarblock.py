"""The tar block layout shared by the shard writer and reader (block size, header fields, errors), written
without ``tarfile`` so archives are byte-deterministic and every read is bounded."""

from __future__ import annotations

BLOCK = 512
END_OF_ARCHIVE = b"\0" * (2 * BLOCK)
ZERO_BLOCK = b"\0" * BLOCK

DEFAULT_MAX_MEMBER_SIZE = 512 * 1024 * 1024
"""Largest member a reader accepts by default (a corrupt size field must not exhaust memory)."""
MAX_EXTENDED_HEADER = 1024 * 1024
"""Largest GNU long-name or pax extended header the reader accepts."""

# Header field slices (POSIX ustar / GNU layout).
NAME = slice(0, 100)
MODE = slice(100, 108)
UID = slice(108, 116)
GID = slice(116, 124)
SIZE = slice(124, 136)
MTIME = slice(136, 148)
CHECKSUM = slice(148, 156)
TYPEFLAG = slice(156, 157)
MAGIC = slice(257, 265)
USTAR_MAGIC6 = slice(257, 263)
PREFIX = slice(345, 500)

GNU_MAGIC = b"ustar  \0"  # magic "ustar " followed by version " \0"
LONGLINK = b"././@LongLink"
REGULAR_TYPES = (b"0", b"\0", b"7")
EXTENDED_TYPES = (b"L", b"x", b"g", b"K")
"""GNU long name (L), pax per-file (x) and global (g) headers, GNU long link (K)."""
DATALESS_TYPES = (b"1", b"2", b"3", b"4", b"5", b"6")
"""Hard/soft links, devices, directories and fifos: no data blocks follow, whatever the size field says."""


def padding(size: int) -> int:
    """Bytes of zero padding after ``size`` data bytes, up to the next block boundary."""
    return -size % BLOCK


class TarFormatError(ValueError):
    """A tar stream that cannot be read as a valid archive; names the source and offset."""


class TruncatedTarError(TarFormatError):
    """The stream ended inside a header or a member's data (or before the end marker)."""


class HeaderChecksumError(TarFormatError):
    """A header block whose stored checksum does not match its bytes."""


class MemberTooLargeError(TarFormatError):
    """A member (or extended header) larger than the reader's cap."""


class MalformedHeaderError(TarFormatError):
    """A header whose numeric fields or extended records cannot be parsed."""


class SampleOrderError(TarFormatError):
    """The members of one sample are not contiguous, or a member name repeats within a sample."""
