"""The little of RESP the bench scripts speak: commands encoded, replies read, over one socket."""
import socket


def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    """A connection to 127.0.0.1:port; an error reply raises RuntimeError, or with
    raise_errors=False is returned as its text."""

    def __init__(self, port, raise_errors=True):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")
        self.raise_errors = raise_errors

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"-" and self.raise_errors:
            raise RuntimeError(rest.decode())
        if t == b"-":
            return rest.decode()
        if t == b"+":
            return rest.decode()
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if t == b"*":
            return [self.read() for _ in range(int(rest))]
        raise RuntimeError(line)

    def q(self, *args):
        self.s.sendall(enc(*args))
        return self.read()
