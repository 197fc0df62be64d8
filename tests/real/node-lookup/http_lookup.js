// node-lookup's program: a Node.js service calling another over HTTP, as a
// client that opens a new connection per request (no keep-alive), 16
// requests in flight, for SECONDS. Node's http client resolves the peer's
// host for every connection with dns.lookup (glibc's getaddrinfo, run on
// libuv's thread pool) unless the host is an address.
//   node http_lookup.js server PORT           answers `ok` on 127.0.0.1:PORT
//   node http_lookup.js client HOST PORT SECONDS
// The client prints the requests it completed and their rate.
'use strict';
const http = require('http');
const [mode, ...args] = process.argv.slice(2);
if (mode === 'server') {
  // A fixed response on a bare socket: the peer costs less per request
  // than the client, whose side is what is measured.
  const port = Number(args[0]);
  const reply = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok';
  require('net')
    .createServer((socket) => {
      socket.once('data', () => socket.end(reply));
      socket.on('error', () => {});
    })
    .listen(port, '127.0.0.1');
} else if (mode === 'client') {
  const [host, port, seconds] = [args[0], Number(args[1]), Number(args[2])];
  const agent = new http.Agent({ keepAlive: false });
  const end = Date.now() + seconds * 1000;
  let done = 0;
  const request = () => {
    if (Date.now() > end) return;
    http
      .get({ host, port, path: '/', agent }, (res) => {
        res.resume();
        res.on('end', () => {
          done++;
          request();
        });
      })
      .on('error', (e) => {
        console.error(`http_lookup: ${e.message}`);
        process.exit(1);
      });
  };
  for (let i = 0; i < 16; i++) request();
  setTimeout(() => {
    console.log(`requests ${done} in ${seconds} s = ${Math.round(done / seconds)} requests/s`);
    process.exit(0);
  }, seconds * 1000);
} else {
  console.error('usage: http_lookup.js server PORT | client HOST PORT SECONDS');
  process.exit(2);
}
