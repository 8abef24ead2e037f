// Hostile: allocates without bound in `partition` when the key is `bomb`. The
// JavaScript twin of plugins/hostile/memory-bomb. When the host refuses to grow
// the memory, SpiderMonkey throws "out of memory", which the SDK reports as a
// `failed` plugin error (wasmtime 48, 64 MiB: within ~120 ms), not a trap.
import { partitionerApi as exportPartitioner } from '../../../sdk/js/sluice-sdk.js';

function bomb(record) {
  if (record.key !== null && new TextDecoder().decode(record.key) === 'bomb') {
    const hoard = [];
    for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
  }
  return 0;
}

export const partitionerApi = exportPartitioner(bomb);
