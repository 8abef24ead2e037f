#!/usr/bin/env node
// kafkajs-check drives Sluice with KafkaJS the way Node services use it. Each subcommand runs
// one scenario and prints one JSON object {"result": ..., "error": ...} on stdout; the caller
// (tests/e2e/test_kafkajs.py) asserts on it. KafkaJS's own log goes to stderr (--verbose:
// debug level).
//
//   node main.js codecs --bootstrap B --spec FILE      produce a spec's records (one codec per
//                                                      partition, idempotent, acks=all), read
//                                                      them back with a consumer group
//   node main.js group  --bootstrap B --topic T --group G --per-phase N
//                                                      two group members: join, rebalance, leave
//   node main.js admin  --bootstrap B --topic T --group G
//                                                      the admin client's topic, config, offset
//                                                      and group calls
//   node main.js txn    --bootstrap B --topic T --group G
//                                                      transactions committed and aborted, with
//                                                      sendOffsets; read back committed and not
'use strict'

const { parseArgs } = require('node:util')

const scenarios = {
  codecs: flags => require('./codecs').runCodecs(flags),
  group: flags => require('./group').runGroup(flags),
  admin: flags => require('./admin').runAdmin(flags),
  txn: flags => require('./txn').runTxn(flags),
}

function parseFlags() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      bootstrap: { type: 'string', default: '127.0.0.1:9092' },
      spec: { type: 'string' },
      topic: { type: 'string' },
      group: { type: 'string' },
      'per-phase': { type: 'string', default: '200' },
      'timeout-ms': { type: 'string', default: '60000' },
      verbose: { type: 'boolean', default: false },
    },
  })
  // deadline: when the whole scenario must be done, in ms since the epoch.
  return { ...values, command: positionals[0], deadline: Date.now() + Number(values['timeout-ms']) }
}

async function main() {
  const out = { result: null }
  try {
    const flags = parseFlags()
    const scenario = scenarios[flags.command]
    if (!scenario) {
      throw new Error(`unknown subcommand ${flags.command} (codecs, group, admin, txn)`)
    }
    out.result = await scenario(flags)
  } catch (e) {
    out.result = e.partialResult ?? null
    out.error = `${e.name}: ${e.message}${e.type ? ` (${e.type})` : ''}`
    process.stderr.write(`${e.stack}\n`)
  }
  // A pipe write is asynchronous in Node: exit once it is flushed. KafkaJS may leave timers
  // behind after a failure, so the process does not wait for them.
  process.stdout.write(`${JSON.stringify(out)}\n`, () => process.exit(out.error ? 1 : 0))
}

main()
