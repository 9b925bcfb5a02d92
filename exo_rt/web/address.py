"""Where the web console is served, and with what certificate: loopback by default; any other
address only with ``--web-remote`` *and* TLS — a certificate the user gives (``--web-cert
FILE --web-key FILE``) or one made for this device (``--web-cert device``: a self-signed
certificate made once with the ``cryptography`` package, kept in the user's configuration
folder, shown by its SHA-256 fingerprint). Refused before anything starts, in one line.
No web framework is imported here (the control process reads it).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from exo_rt.errors import ConfigError

DEFAULT_PORT = 8080
DEVICE = "device"  # --web-cert device: the certificate made for this device
DEVICE_DAYS = 3650  # the device certificate's validity (d)


@dataclass(frozen=True)
class WebAddress:
    """``host``, ``port`` (0: any free port), ``remote`` (an address other than loopback was
    allowed), ``cert`` and ``key`` (PEM files: TLS), ``fingerprint`` (the certificate's
    SHA-256, as ``AB:CD:…``)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    remote: bool = False
    cert: str | None = None
    key: str | None = None
    fingerprint: str | None = None

    @property
    def tls(self) -> bool:
        return self.cert is not None

    def args(self) -> list[str]:
        """The web process's arguments for it."""
        out = ["--host", self.host, "--port", str(self.port)]
        if self.remote:
            out.append("--remote")
        if self.tls:
            out += ["--cert", str(self.cert), "--key", str(self.key)]
        return out


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_web(spec: str, remote: bool = False, cert: str | None = None,
              key: str | None = None, config_dir: Path | None = None) -> WebAddress:
    """``[HOST:]PORT`` (and the TLS options) → a :class:`WebAddress`; ConfigError (one line:
    what, how to fix it) for a bad spec, an address other than loopback without
    ``remote`` or without TLS, a key without a certificate or the other way round, or a
    certificate that cannot be read. ``cert`` ``device``: the device's own (made if need
    be, in ``config_dir``, default :func:`device_dir`)."""
    host, sep, port = str(spec).rpartition(":")
    if not sep:
        host = "127.0.0.1"
    host = host.strip("[]") or "127.0.0.1"
    try:
        p = int(port)
        if not 0 <= p <= 65535:
            raise ValueError
    except ValueError:
        raise ConfigError(f"cannot read --web '{spec}'", None,
                          f"write PORT or HOST:PORT, e.g. --web {DEFAULT_PORT}") from None
    if cert == DEVICE:
        if key is not None:
            raise ConfigError("--web-key with --web-cert device", None,
                              "the device's certificate has its own key: leave --web-key out")
        cert, key = device_certificate(config_dir)
    elif (cert is None) != (key is None):
        raise ConfigError("--web-cert and --web-key go together", None,
                          "give both PEM files, or --web-cert device (a certificate made "
                          "for this device)")
    if not is_loopback(host):
        if not remote:
            raise ConfigError(f"--web on {host} would let others on that network reach the "
                              "therapist's console", None,
                              "serve on 127.0.0.1 (the default), or add --web-remote (and TLS)")
        if cert is None:
            raise ConfigError(f"--web on {host} without TLS: a page on the network would "
                              "send requests in clear", None,
                              "add --web-cert FILE --web-key FILE (your certificate), or "
                              "--web-cert device (one made for this device, its fingerprint "
                              "printed)")
    fingerprint = None
    if cert is not None:
        for what, path in (("certificate", cert), ("key", key)):
            if not Path(path).is_file():
                raise ConfigError(f"--web-{'cert' if what == 'certificate' else 'key'} "
                                  f"{path}: no such file", None,
                                  f"give the {what}'s PEM file, or --web-cert device")
        fingerprint = fingerprint_of(Path(cert))
    return WebAddress(host, p, remote, None if cert is None else str(cert),
                      None if key is None else str(key), fingerprint)


def fingerprint_of(cert: Path) -> str:
    """The SHA-256 fingerprint of a PEM certificate (the first in the file), ``AB:CD:…``
    (what a browser shows). ConfigError when it is no certificate."""
    import ssl

    text = cert.read_text(encoding="ascii", errors="replace")
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    if begin not in text or end not in text:
        raise ConfigError(f"--web-cert {cert}: not a PEM certificate", None,
                          "give the certificate's PEM file (-----BEGIN CERTIFICATE-----)")
    pem = text[text.index(begin): text.index(end) + len(end)]
    digest = hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def device_dir() -> Path:
    """Where the device's certificate is kept: ``$XDG_CONFIG_HOME/exo-rt/web`` (default
    ``~/.config/exo-rt/web``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "exo-rt" / "web"


def device_certificate(config_dir: Path | None = None) -> tuple[str, str]:
    """(certificate, key) PEM paths of this device's self-signed certificate, made the first
    time (an ECDSA P-256 key, readable by this user only; valid ``DEVICE_DAYS``; its names
    this machine's host name, ``localhost`` and its loopback and first network address)."""
    folder = Path(config_dir) if config_dir is not None else device_dir()
    cert, key = folder / "device-cert.pem", folder / "device-key.pem"
    if cert.is_file() and key.is_file():
        return str(cert), str(key)
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        raise ConfigError("--web-cert device needs the cryptography package", None,
                          "pip install 'exo-rt[web]', or give --web-cert FILE --web-key "
                          "FILE") from None
    import datetime

    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    name = socket.gethostname() or "exo-rt"
    pk = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"exo-rt {name}"),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "exo-rt device")])
    sans: list = [x509.DNSName(name), x509.DNSName("localhost"),
                  x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    try:
        sans.append(x509.IPAddress(ipaddress.ip_address(socket.gethostbyname(name))))
    except (OSError, ValueError):
        pass
    now = datetime.datetime.now(datetime.UTC)
    built = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
             .public_key(pk.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=DEVICE_DAYS))
             .add_extension(x509.SubjectAlternativeName(list(dict.fromkeys(sans))),
                            critical=False)
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .sign(pk, hashes.SHA256()))
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pk.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()))
    cert.write_bytes(built.public_bytes(serialization.Encoding.PEM))
    return str(cert), str(key)
