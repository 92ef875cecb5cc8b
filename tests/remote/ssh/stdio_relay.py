"""A stand-in for `gcloud compute start-iap-tunnel NAME PORT --listen-on-stdin`: relays stdin/stdout to a TCP
port on loopback, as IAP relays them to the VM. Records the instance name, port and any further arguments it
was given."""

import os
import select
import socket
import sys


def main() -> None:
    record, address, name, port, *more = sys.argv[1:]
    with open(record, "a") as f:
        f.write(" ".join([name, port, *more]) + "\n")
    sock = socket.create_connection((address, int(port)))
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    while True:
        readable, _, _ = select.select([stdin, sock], [], [])
        if stdin in readable:
            data = os.read(stdin, 65536)
            if not data:
                return
            sock.sendall(data)
        if sock in readable:
            data = sock.recv(65536)
            if not data:
                return
            os.write(stdout, data)


if __name__ == "__main__":
    main()
