"""The HF token MaxText writes into TensorBoard event files is taken out, and the files stay readable."""

import json
import subprocess
from pathlib import Path

from workload.run.tensorboard_redact import crc32c, read_records, redact_event_files, write_record

REPO = Path(__file__).resolve().parents[3]

TOKEN = "hf_" + "Qw3" * 12


def test_crc32c_known_vector():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


def test_token_is_replaced_and_checksums_stay_valid(tmp_path):
    records = [b"plain summary", f"text hf_access_token={TOKEN} in a config dump".encode(), b"loss 11.9"]
    events = tmp_path / "run" / "events.out.tfevents.123.vm"
    events.parent.mkdir()
    events.write_bytes(b"".join(write_record(r) for r in records))
    untouched = tmp_path / "run" / "events.out.tfevents.456.vm"
    untouched.write_bytes(write_record(b"no secret here"))
    before = untouched.stat().st_mtime_ns

    assert redact_event_files(str(tmp_path), TOKEN) == [str(events)]

    cleaned, tail = read_records(events.read_bytes())
    assert tail == b""
    assert TOKEN.encode() not in events.read_bytes()
    assert cleaned[0] == records[0] and cleaned[2] == records[2]
    assert cleaned[1] == records[1].replace(TOKEN.encode(), b"*" * len(TOKEN))
    assert untouched.stat().st_mtime_ns == before


def test_no_token_changes_nothing(tmp_path):
    events = tmp_path / "events.out.tfevents.1"
    events.write_bytes(write_record(b"x"))
    assert redact_event_files(str(tmp_path), None) == []
    assert redact_event_files(str(tmp_path / "missing"), TOKEN) == []


def test_a_record_cut_short_by_a_killed_writer_is_masked_too(tmp_path):
    events = tmp_path / "events.out.tfevents.1"
    whole = write_record(b"step 1")
    cut = write_record(f"config hf_access_token={TOKEN}".encode())[:-6]
    events.write_bytes(whole + cut)
    redact_event_files(str(tmp_path), TOKEN)
    records, tail = read_records(events.read_bytes())
    assert records == [b"step 1"]
    assert TOKEN.encode() not in tail and len(tail) == len(cut)


SUMMARY_ROUND_TRIP = """
import json, sys, glob
from tensorboardX import SummaryWriter
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from workload.run.tensorboard_redact import redact_event_files
directory, token = sys.argv[1], sys.argv[2]
writer = SummaryWriter(directory)
writer.add_text("hf_access_token", token)
writer.add_scalar("learning/loss", 11.5, 1)
writer.close()
changed = redact_event_files(directory, token)
texts = []
for path in glob.glob(directory + "/events.out.tfevents*"):
    for event in EventFileLoader(path).Load():  # TensorBoard's own reader checks every checksum
        texts += [v.tensor.string_val[0].decode() for v in event.summary.value if v.tensor.string_val]
print(json.dumps({"changed": len(changed), "texts": texts}))
"""


def test_tensorboard_still_reads_a_redacted_maxtext_style_file(tmp_path, maxtext_python):
    done = subprocess.run(
        [maxtext_python, "-c", SUMMARY_ROUND_TRIP, str(tmp_path), TOKEN],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["changed"] == 1
    assert result["texts"] == ["*" * len(TOKEN)]
