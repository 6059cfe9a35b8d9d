// Starting `roncho serve` for the browser suites: free loopback ports, a
// temporary data directory, and a wait until it answers.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export function freePort() {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts `roncho serve` with `args` beside the addresses and data directory,
 * and `env` beside PATH and HOME; resolves once /health answers. Returns
 * its REST base address, port and data directory, and `stop`.
 */
export async function startRoncho(roncho, { args = [], env = {} } = {}) {
  const [grpc, rest] = [await freePort(), await freePort()];
  const data = mkdtempSync(path.join(os.tmpdir(), 'roncho-browser-'));
  const child = spawn(
    roncho,
    ['serve', '--listen', `127.0.0.1:${grpc}`, '--rest-listen', `127.0.0.1:${rest}`, '--data-dir', data, ...args],
    { env: { PATH: process.env.PATH, HOME: process.env.HOME, RONCHO_LOG: 'warn', ...env }, stdio: 'inherit' },
  );
  const base = `http://127.0.0.1:${rest}`;
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${base}/health`)).ok) break;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  const stop = () => {
    child.kill('SIGKILL');
    rmSync(data, { recursive: true, force: true });
  };
  return { base, rest, data, stop };
}
