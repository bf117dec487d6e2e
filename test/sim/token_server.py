#!/usr/bin/env python3
"""A registry token service for tests (Docker's token auth spec,
distribution/docs/spec/auth/token.md and jwt.md), standard library only.

GET /token?service=S&scope=repository:NAME:ACTIONS[&scope=...] answers
{"token", "access_token", "expires_in", "issued_at"}: a JWT (RS256) whose
header carries the signing certificate as x5c, which docker-registry checks
against its auth.token.rootcertbundle. The claims are the spec's: iss, sub,
aud (the service), exp, nbf, iat, jti and access[].

Credentials come as HTTP Basic. The right ones get every action asked for;
none get a token with no access (as public token services do for a private
repository, so the registry then answers 401 insufficient_scope); wrong
ones get 401. Signing is `openssl dgst -sha256 -sign` (PKCS #1 v1.5, which
is what RS256 is, RFC 7518 section 3.3), run with an argv.

Every request's user (or "-") and path are appended to LOG, one a line,
so a test can tell the token service was asked, and by whom.

usage: token_server.py PORT KEY.pem CERT.pem USER PASSWORD ISSUER LOG
"""

import base64
import http.server
import json
import secrets
import ssl
import subprocess
import sys
import time
import urllib.parse


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main():
    port, key, cert, user, password, issuer, log = sys.argv[1:8]
    der = ssl.PEM_cert_to_DER_cert(open(cert).read())

    def sign(claims):
        header = {"typ": "JWT", "alg": "RS256",
                  "x5c": [base64.b64encode(der).decode()]}
        signing_input = (b64url(json.dumps(header).encode()) + "." +
                         b64url(json.dumps(claims).encode()))
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key],
                             input=signing_input.encode(),
                             capture_output=True, check=True).stdout
        return signing_input + "." + b64url(sig)

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            who = "-"
            granted = True
            got = self.headers.get("Authorization", "")
            if got:
                if not got.startswith("Basic "):
                    return self.answer(401, {"details": "Basic only"})
                try:
                    u, _, p = base64.b64decode(got[6:]).decode().partition(":")
                except (ValueError, UnicodeDecodeError):
                    return self.answer(400, {"details": "bad Basic"})
                who = u
                if u != user or p != password:
                    with open(log, "a") as f:
                        f.write(f"refused {who} {url.path}\n")
                    return self.answer(401, {"details": "bad credentials"})
            else:
                granted = False
            with open(log, "a") as f:
                f.write(f"token {who} {url.path}\n")
            access = []
            for scope in query.get("scope", []):
                kind, _, rest = scope.partition(":")
                name, _, actions = rest.rpartition(":")
                access.append({"type": kind, "name": name,
                               "actions": actions.split(",") if granted
                               else []})
            now = int(time.time())
            claims = {"iss": issuer, "sub": who,
                      "aud": query.get("service", [""])[0],
                      "exp": now + 300, "nbf": now - 10, "iat": now,
                      "jti": secrets.token_hex(8), "access": access}
            token = sign(claims)
            self.answer(200, {"token": token, "access_token": token,
                              "expires_in": 300,
                              "issued_at": time.strftime(
                                  "%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))})

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)),
                                             Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
