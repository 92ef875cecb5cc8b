"""Take the HF token out of MaxText's TensorBoard event files.

MaxText 0.2.3 copies `$HF_TOKEN` into its config (pyconfig infers `hf_access_token`) and writes its whole
config into TensorBoard as text summaries (`maxtext_utils.add_config_to_summary_writer`). The runner never
sets `HF_TOKEN` for MaxText (workload/launch/hf_token.py), so this is defence in depth, run after each attempt: should
the token reach an event file some other way, the files the pipeline keeps do not hold it. Each TFRecord
holding it gets the token's bytes
replaced by as many '*' (protobuf lengths stay valid) and its checksums recomputed; the incomplete last record
a killed writer leaves is masked too. Files are rewritten atomically.
TFRecord: uint64 length, uint32 masked crc32c(length), data, uint32 masked crc32c(data).
"""

from __future__ import annotations

import struct

from workload.run import storage


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(blob: bytes) -> tuple[list[bytes], bytes]:
    """The complete records, and the bytes of an incomplete last one (a writer killed mid-record)."""
    records, pos = [], 0
    while pos + 12 <= len(blob):
        (length,) = struct.unpack_from("<Q", blob, pos)
        end = pos + 12 + length + 4
        if end > len(blob):
            break
        records.append(blob[pos + 12 : pos + 12 + length])
        pos = end
    return records, blob[pos:]


def write_record(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


def redact(blob: bytes, token: str) -> bytes | None:
    """The event file `blob` with the token masked, or None when it does not hold the token."""
    secret = token.encode()
    if secret not in blob:
        return None
    records, tail = read_records(blob)
    mask = b"*" * len(secret)
    return b"".join(write_record(r.replace(secret, mask)) for r in records) + tail.replace(secret, mask)


def redact_event_files(directory: str, token: str | None) -> list[str]:
    """Rewrite every `events.out.tfevents*` under `directory` (a local path or a gs:// URL) that holds `token`;
    returns their paths. Each file is replaced whole (workload/run/storage.py)."""
    if not token:
        return []
    return storage.rewrite_files(directory, "events.out.tfevents", lambda blob: redact(blob, token))
