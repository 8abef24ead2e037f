// What every scenario shares: the Kafka client, a deadline poll, and the codec registrations.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

// Every message names its partition, so the v2 default partitioner's notice is noise.
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

// KafkaJS logs through console by default, on stdout; the JSON answer must be stdout's last
// line, so every log entry goes to stderr.
const toStderr = () => ({ namespace, label, log }) => {
  process.stderr.write(`${label} [${namespace}] ${JSON.stringify(log)}\n`)
}

/** A Kafka client for flags.bootstrap; retries bounded so a failure surfaces quickly. */
function kafka(flags, clientId = 'sluice-kafkajs-check') {
  return new Kafka({
    clientId,
    brokers: flags.bootstrap.split(','),
    logLevel: flags.verbose ? logLevel.DEBUG : logLevel.WARN,
    logCreator: toStderr,
    retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 2000 },
  })
}

/** Polls cond every 20 ms until it holds; throws naming `what` after the deadline (ms). */
async function waitFor(deadline, what, cond) {
  while (!(await cond())) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`)
    }
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

/** Runs named steps in order, each result under its name; the first failure stops, and the
 * error carries what was observed so far. */
async function runSteps(steps) {
  const out = {}
  for (const [name, run] of steps) {
    try {
      out[name] = await run()
    } catch (e) {
      e.message = `${name}: ${e.message}`
      e.partialResult = out
      throw e
    }
  }
  return out
}

module.exports = { kafka, waitFor, runSteps }
