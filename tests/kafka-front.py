#!/usr/bin/env python3
"""A front for a Kafka-protocol broker that adds what tansu 0.6.0 lacks, for the TLS and PLAIN
tests: TLS (its --cert and --key flags conflict with each other) and SASL PLAIN (it offers only
SCRAM).

  kafka-front.py certs DIR
      writes a test CA (ca.pem), a server certificate for 127.0.0.1 (server.pem, server.key) and a
      client certificate (client.pem, client.key) signed by that CA, with the openssl command
  kafka-front.py serve LISTEN_PORT BROKER_PORT [--tls DIR [--require-client-cert]]
                                               [--plain USER:PASSWORD]
      listens on 127.0.0.1:LISTEN_PORT and pipes each connection to 127.0.0.1:BROKER_PORT.
      --tls DIR: clients connect with TLS, DIR's server certificate; --require-client-cert: a
      client must present a certificate signed by DIR's CA (mutual TLS).
      --plain USER:PASSWORD: a client must authenticate with SASL PLAIN as USER before anything
      but ApiVersions reaches the broker (the front answers SaslHandshake and SaslAuthenticate
      itself, as a Kafka broker does: a wrong password gets SASL_AUTHENTICATION_FAILED and the
      connection is closed).
      --swallow-first-commit: the first OffsetCommit request any client sends through the front
      is never answered, and its connection goes silent both ways from then on (the client's
      requests on it time out; a new connection is served again). Says so on stderr when it
      happens.
      Prints "ready" once it listens. The broker must advertise LISTEN_PORT, so that clients reach
      it through the front after bootstrap.

Only the Python standard library and the openssl command are used.
"""
import asyncio
import os
import ssl
import struct
import subprocess
import sys

OFFSET_COMMIT, API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 8, 18, 17, 36
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE = 58, 33, 34


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


# --- the few pieces of the Kafka protocol SASL needs ---------------------------------------------

def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_uvarint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


async def read_frame(reader):
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


def frame(payload):
    return struct.pack(">i", len(payload)) + payload


def request_header(req):
    """api key, api version, correlation id and the offset of the body (header v1; SaslAuthenticate
    v2 is flexible: header v2, with tagged fields after the client id)."""
    api_key, version, correlation = struct.unpack(">hhi", req[:8])
    n = struct.unpack(">h", req[8:10])[0]
    i = 10 + max(n, 0)
    if api_key == SASL_AUTHENTICATE and version >= 2:
        tags, i = read_uvarint(req, i)
        for _ in range(tags):
            _, i = read_uvarint(req, i)
            size, i = read_uvarint(req, i)
            i += size
    return api_key, version, correlation, i


def handshake_response(correlation, mechanism):
    error = 0 if mechanism == "PLAIN" else UNSUPPORTED_SASL_MECHANISM
    return frame(struct.pack(">ihi", correlation, error, 1) + struct.pack(">h", 5) + b"PLAIN")


def authenticate_response(correlation, version, error, message):
    msg = message.encode() if message else None
    if version >= 2:  # flexible: compact strings and bytes, tagged fields
        body = struct.pack(">h", error)
        body += uvarint(len(msg) + 1) + msg if msg is not None else uvarint(0)
        body += uvarint(1) + struct.pack(">q", 0) + uvarint(0)
        return frame(struct.pack(">i", correlation) + uvarint(0) + body)
    body = struct.pack(">h", error)
    body += struct.pack(">h", len(msg)) + msg if msg is not None else struct.pack(">h", -1)
    body += struct.pack(">i", 0)
    if version >= 1:
        body += struct.pack(">q", 0)
    return frame(struct.pack(">i", correlation) + body)


async def authenticate(client_reader, client_writer, broker_reader, broker_writer, user, password):
    """SASL PLAIN as a broker runs it; True once the client has authenticated."""
    mechanism = None
    while True:
        req = await read_frame(client_reader)
        api_key, version, correlation, body = request_header(req)
        if api_key == API_VERSIONS:
            broker_writer.write(frame(req))
            await broker_writer.drain()
            client_writer.write(frame(await read_frame(broker_reader)))
        elif api_key == SASL_HANDSHAKE:
            n = struct.unpack(">h", req[body:body + 2])[0]
            mechanism = req[body + 2:body + 2 + n].decode()
            client_writer.write(handshake_response(correlation, mechanism))
        elif api_key == SASL_AUTHENTICATE and mechanism == "PLAIN":
            if version >= 2:
                n, i = read_uvarint(req, body)
                token = req[i:i + n - 1]
            else:
                n = struct.unpack(">i", req[body:body + 4])[0]
                token = req[body + 4:body + 4 + n]
            parts = token.split(b"\0")
            ok = len(parts) == 3 and parts[1] == user.encode() and parts[2] == password.encode()
            if ok:
                client_writer.write(authenticate_response(correlation, version, 0, None))
                await client_writer.drain()
                return True
            client_writer.write(authenticate_response(
                correlation, version, SASL_AUTHENTICATION_FAILED,
                "Authentication failed: Invalid username or password"))
            await client_writer.drain()
            return False
        else:  # anything else before authenticating: a broker closes the connection
            return False
        await client_writer.drain()


def close(writer):
    try:
        writer.close()
    except Exception:
        pass


async def pipe(reader, writer, silent=None):
    """Bytes as they come, until the reader's end; once `silent` (an event) is set, they are
    dropped and the writer is left open."""
    try:
        while data := await reader.read(65536):
            if silent is not None and silent.is_set():
                continue
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        if silent is None or not silent.is_set():
            close(writer)


async def pipe_requests(reader, writer, silent, swallow):
    """Client to broker, request by request: the first OffsetCommit of the front (`swallow`
    holds whether it is still to come) is dropped, and the connection's `silent` event set, so
    nothing more passes either way on it."""
    try:
        while True:
            req = await read_frame(reader)
            if silent.is_set():
                continue
            if swallow[0] and struct.unpack(">h", req[:2])[0] == OFFSET_COMMIT:
                swallow[0] = False
                silent.set()
                print("kafka-front: an OffsetCommit request swallowed", file=sys.stderr, flush=True)
                continue
            writer.write(frame(req))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, OSError, struct.error):
        pass
    finally:
        close(writer)


async def serve(listen_port, broker_port, tls_dir, require_client_cert, plain, swallow_commit=False):
    swallow = [swallow_commit]
    ctx = None
    if tls_dir:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(os.path.join(tls_dir, "server.pem"), os.path.join(tls_dir, "server.key"))
        if require_client_cert:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(os.path.join(tls_dir, "ca.pem"))

    async def handle(client_reader, client_writer):
        try:
            broker_reader, broker_writer = await asyncio.open_connection("127.0.0.1", broker_port)
        except OSError:
            client_writer.close()
            return
        if plain:
            try:
                ok = await authenticate(client_reader, client_writer, broker_reader, broker_writer, *plain)
            except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, OSError, struct.error,
                    IndexError, UnicodeDecodeError):
                ok = False
            if not ok:
                client_writer.close()
                broker_writer.close()
                return
        if swallow_commit:
            silent = asyncio.Event()
            await asyncio.gather(pipe_requests(client_reader, broker_writer, silent, swallow),
                                 pipe(broker_reader, client_writer, silent))
            return
        await asyncio.gather(pipe(client_reader, broker_writer), pipe(broker_reader, client_writer))

    server = await asyncio.start_server(handle, "127.0.0.1", listen_port, ssl=ctx)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main(argv):
    if len(argv) == 2 and argv[0] == "certs":
        return certs(argv[1])
    if len(argv) < 3 or argv[0] != "serve":
        sys.exit(__doc__)
    listen_port, broker_port, rest = int(argv[1]), int(argv[2]), argv[3:]
    tls_dir, require_client_cert, plain, swallow = None, False, None, False
    while rest:
        if rest[0] == "--tls" and len(rest) > 1:
            tls_dir, rest = rest[1], rest[2:]
        elif rest[0] == "--require-client-cert":
            require_client_cert, rest = True, rest[1:]
        elif rest[0] == "--plain" and len(rest) > 1 and ":" in rest[1]:
            plain, rest = tuple(rest[1].split(":", 1)), rest[2:]
        elif rest[0] == "--swallow-first-commit":
            swallow, rest = True, rest[1:]
        else:
            sys.exit(__doc__)
    asyncio.run(serve(listen_port, broker_port, tls_dir, require_client_cert, plain, swallow))


if __name__ == "__main__":
    main(sys.argv[1:])
