#!/usr/bin/env python3
"""A TLS front for a plaintext Kafka-protocol broker, for the TLS test (tansu 0.6.0 cannot serve
TLS itself: its --cert and --key flags conflict with each other).

  tls-proxy.py certs DIR
      writes a test CA (ca.pem), a server certificate for 127.0.0.1 (server.pem, server.key) and a
      client certificate (client.pem, client.key) signed by that CA, with the openssl command
  tls-proxy.py serve LISTEN_PORT BROKER_PORT DIR [--require-client-cert]
      accepts TLS on 127.0.0.1:LISTEN_PORT with DIR's server certificate and pipes the decrypted
      bytes to 127.0.0.1:BROKER_PORT; with --require-client-cert a client must present a
      certificate signed by DIR's CA (mutual TLS). Prints "ready" once it listens. The broker
      must advertise LISTEN_PORT, so that clients reach it through the proxy after bootstrap.

Only the Python standard library and the openssl command are used.
"""
import asyncio
import os
import ssl
import subprocess
import sys


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def certs(d):
    os.makedirs(d, exist_ok=True)
    p = lambda name: os.path.join(d, name)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=neardup test CA",
            "-keyout", p("ca.key"), "-out", p("ca.pem"))
    ext = p("san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, cn in (("server", "127.0.0.1"), ("client", "neardup")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}",
                "-keyout", p(f"{name}.key"), "-out", p(f"{name}.csr"))
        openssl("x509", "-req", "-in", p(f"{name}.csr"), "-CA", p("ca.pem"), "-CAkey", p("ca.key"),
                "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", p(f"{name}.pem"))


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def serve(listen_port, broker_port, d, require_client_cert):
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(os.path.join(d, "server.pem"), os.path.join(d, "server.key"))
    if require_client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(os.path.join(d, "ca.pem"))

    async def handle(client_reader, client_writer):
        try:
            broker_reader, broker_writer = await asyncio.open_connection("127.0.0.1", broker_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, broker_writer), pipe(broker_reader, client_writer))

    server = await asyncio.start_server(handle, "127.0.0.1", listen_port, ssl=ctx)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main(argv):
    if len(argv) == 2 and argv[0] == "certs":
        certs(argv[1])
    elif len(argv) in (4, 5) and argv[0] == "serve":
        asyncio.run(serve(int(argv[1]), int(argv[2]), argv[3], argv[4:] == ["--require-client-cert"]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
