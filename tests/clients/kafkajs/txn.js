// The transactions scenario: a transactional producer commits 10 records, aborts 10, commits
// 10 more, all to partition 0, each transaction also committing the group's offset of
// partition 0 (sendOffsets, as consume-transform-produce does); the group's committed offset
// is read after each. Then two consumers read the partition to its end, one read_committed
// (KafkaJS's default, readUncommitted: false) and one readUncommitted.
'use strict'

const { kafka, waitFor } = require('./common')

const ROUNDS = [
  { name: 'commit-1', commit: true, offset: 10 },
  { name: 'abort', commit: false, offset: 20 },
  { name: 'commit-2', commit: true, offset: 30 },
]
const LAST = 'commit-2-9'

async function runTxn(flags) {
  const { topic, group } = flags
  const client = kafka(flags)
  const admin = client.admin()
  const producer = client.producer({
    transactionalId: `sluice-kafkajs-${topic}`,
    idempotent: true,
    maxInFlightRequests: 1,
  })
  await Promise.all([admin.connect(), producer.connect()])
  const out = { committed_offsets: {} }
  try {
    for (const round of ROUNDS) {
      const txn = await producer.transaction()
      const messages = Array.from({ length: 10 }, (_, i) => ({ partition: 0, value: `${round.name}-${i}` }))
      await txn.send({ topic, acks: -1, messages })
      await txn.sendOffsets({
        consumerGroupId: group,
        topics: [{ topic, partitions: [{ partition: 0, offset: String(round.offset) }] }],
      })
      await (round.commit ? txn.commit() : txn.abort())
      const [t] = await admin.fetchOffsets({ groupId: group, topics: [topic] })
      out.committed_offsets[round.name] = Number(t.partitions.find(p => p.partition === 0).offset)
    }
    const [committed, uncommitted] = await Promise.all([
      readAll(flags, client, `${group}-committed`, false),
      readAll(flags, client, `${group}-uncommitted`, true),
    ])
    out.read_committed = committed
    out.read_uncommitted = uncommitted
    return out
  } catch (e) {
    e.partialResult = out
    throw e
  } finally {
    await Promise.all([admin.disconnect(), producer.disconnect()])
  }
}

/** Reads partition 0 from the start with a fresh group until it has seen LAST. */
async function readAll(flags, client, groupId, readUncommitted) {
  const consumer = client.consumer({ groupId, readUncommitted, maxWaitTimeInMs: 200 })
  const values = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topic: flags.topic, fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ message }) => {
        values.push(message.value.toString())
      },
    })
    await waitFor(flags.deadline, `${LAST} (readUncommitted ${readUncommitted})`, () => values.at(-1) === LAST)
  } finally {
    await consumer.disconnect()
  }
  return values
}

module.exports = { runTxn }
