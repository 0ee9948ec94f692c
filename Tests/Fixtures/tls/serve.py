# A TLS origin for the end-to-end tests: serves BODY_BYTES bytes (a fixed
# pattern) for any path over HTTPS with server.pem, a certificate for
# localhost and 127.0.0.1 signed by ca.pem (a test CA made for these tests
# only; its key was thrown away). Writes the port it listens on to PORT_FILE,
# then serves until killed.
#
#   python3 serve.py BODY_BYTES PORT_FILE
import http.server
import os
import ssl
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BODY = bytes((i * 31 + 7) % 256 for i in range(int(sys.argv[1])))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, format, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(os.path.join(HERE, "server.pem"), os.path.join(HERE, "server.key"))
server.socket = context.wrap_socket(server.socket, server_side=True)
with open(sys.argv[2] + ".tmp", "w") as port_file:
    port_file.write("%d\n" % server.server_address[1])
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
server.serve_forever()
