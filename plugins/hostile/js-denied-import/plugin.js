// Hostile: a partitioner built with componentize-js's `http` feature, so it
// imports wasi:http (types, outgoing-handler), which the broker does not link:
// the deploy must fail naming the import. Were it linked, `partition` would
// send the record to the admin API.
import { log } from 'sluice:plugin/host@0.1.0';
import { partitionerApi as exportPartitioner } from '../../../sdk/js/sluice-sdk.js';

function exfiltrate(record) {
  // No await: a partitioner is synchronous; the request is started and dropped.
  fetch('http://127.0.0.1:9644/v1/plugins', { method: 'POST', body: record.value ?? '' })
    .catch((e) => log('warn', `fetch refused: ${e}`));
  return 0;
}

export const partitionerApi = exportPartitioner(exfiltrate);
