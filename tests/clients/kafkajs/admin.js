// The admin scenario: KafkaJS's admin client through a topic's life. Create (3 partitions,
// configs), create again (already exists), list, describe and replace the configs
// (AlterConfigs), add partitions, produce and delete records, list offsets (earliest/latest
// and by timestamp), set a group's offsets and consume from them, reset them to the earliest
// and consume again, list, describe and delete the group, delete the topic. Each step's observation is kept
// under its name; the first failed call stops.
'use strict'

const { ConfigResourceTypes } = require('kafkajs')
const { kafka, runSteps, waitFor } = require('./common')

// DescribeConfigs' DYNAMIC_TOPIC_CONFIG source (v1+): a key set on the topic itself.
const CONFIG_SOURCE_DYNAMIC_TOPIC = 1

async function runAdmin(flags) {
  const { topic, group } = flags
  const client = kafka(flags)
  const admin = client.admin()
  const producer = client.producer()
  await Promise.all([admin.connect(), producer.connect()])
  const create = () =>
    admin.createTopics({
      topics: [
        {
          topic,
          numPartitions: 3,
          replicationFactor: 1,
          configEntries: [
            { name: 'retention.ms', value: '3600000' },
            { name: 'max.message.bytes', value: '500000' },
          ],
        },
      ],
    })
  const steps = [
    ['create', create],
    ['create_again', create],
    ['listed', async () => (await admin.listTopics()).includes(topic)],
    ['partitions_after_create', () => partitions(admin, topic)],
    ['configs_after_create', () => topicConfigs(admin, topic)],
    [
      'alter_configs',
      async () => {
        // AlterConfigs replaces the topic's whole set: max.message.bytes goes back to its default.
        const r = await admin.alterConfigs({
          resources: [
            {
              type: ConfigResourceTypes.TOPIC,
              name: topic,
              configEntries: [{ name: 'retention.ms', value: '7200000' }],
            },
          ],
        })
        return r.resources.map(x => x.errorCode)
      },
    ],
    ['configs_after_alter', () => topicConfigs(admin, topic)],
    ['create_partitions', () => admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] })],
    ['partitions_after_create_partitions', () => partitions(admin, topic)],
    [
      'produce',
      async () => {
        const messages = Array.from({ length: 10 }, (_, i) => ({ partition: 4, value: `r${i}` }))
        const [meta] = await producer.send({ topic, acks: -1, messages })
        return Number(meta.baseOffset)
      },
    ],
    [
      'delete_records',
      async () => {
        await admin.deleteTopicRecords({ topic, partitions: [{ partition: 4, offset: '6' }] })
        return null
      },
    ],
    ['topic_offsets', () => topicOffsets(admin, topic)],
    [
      'offsets_by_timestamp',
      async () => byPartition(await admin.fetchTopicOffsetsByTimestamp(topic, 0), p => Number(p.offset)),
    ],
    ...groupSteps(flags, client, admin),
    [
      'delete_topic',
      async () => {
        await admin.deleteTopics({ topics: [topic] })
        return null
      },
    ],
    ['listed_after_delete', async () => (await admin.listTopics()).includes(topic)],
    [
      'cluster',
      async () => {
        const c = await admin.describeCluster()
        return { brokers: c.brokers.map(b => b.nodeId), controller: c.controller }
      },
    ],
  ]
  try {
    return await runSteps(steps)
  } finally {
    await Promise.all([admin.disconnect(), producer.disconnect()])
  }
}

function groupSteps(flags, client, admin) {
  const { topic, group } = flags
  return [
    [
      'set_offsets',
      async () => {
        await admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 4, offset: '8' }] })
        return null
      },
    ],
    ['fetch_offsets', () => committed(admin, group, topic)],
    ['consumed_after_set', () => consumeFromCommitted(flags, client)],
    ['fetch_offsets_after_consume', () => committed(admin, group, topic)],
    [
      'reset_offsets',
      async () => {
        await admin.resetOffsets({ groupId: group, topic, earliest: true })
        return null
      },
    ],
    ['fetch_offsets_after_reset', () => committed(admin, group, topic)],
    ['consumed_after_reset', () => consumeFromCommitted(flags, client)],
    [
      'list_groups',
      async () => {
        const { groups } = await admin.listGroups()
        return groups.filter(g => g.groupId === group)
      },
    ],
    [
      'describe_group',
      async () => {
        const { groups } = await admin.describeGroups([group])
        return groups.map(g => ({ groupId: g.groupId, state: g.state, members: g.members.length }))
      },
    ],
    ['delete_groups', () => admin.deleteGroups([group])],
    ['fetch_offsets_after_delete_group', () => committed(admin, group, topic)],
  ]
}

/** A group member reads the topic from the group's committed offsets until it has read
 * partition 4 to its end (offset 10), then leaves; the offsets it read, by partition.
 * fromBeginning: KafkaJS takes any negative committed offset (resetOffsets commits -2) as
 * none and starts such a partition where the subscription says. */
async function consumeFromCommitted(flags, client) {
  const consumer = client.consumer({ groupId: flags.group, maxWaitTimeInMs: 200 })
  const read = {}
  await consumer.connect()
  try {
    await consumer.subscribe({ topic: flags.topic, fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        ;(read[partition] ??= []).push(Number(message.offset))
      },
    })
    await waitFor(flags.deadline, 'partition 4 read to its end', () => read[4]?.at(-1) === 9)
  } finally {
    await consumer.disconnect()
  }
  return read
}

const byPartition = (list, value) => Object.fromEntries(list.map(p => [p.partition, value(p)]))

async function partitions(admin, topic) {
  const { topics } = await admin.fetchTopicMetadata({ topics: [topic] })
  return topics[0].partitions
    .map(p => ({ partition: p.partitionId, leader: p.leader }))
    .sort((a, b) => a.partition - b.partition)
}

/** The topic's configs that are set on the topic itself, key -> value. */
async function topicConfigs(admin, topic) {
  const { resources } = await admin.describeConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }],
    includeSynonyms: false,
  })
  const set = {}
  for (const e of resources[0].configEntries) {
    if (e.configSource === CONFIG_SOURCE_DYNAMIC_TOPIC) set[e.configName] = e.configValue
  }
  return set
}

async function topicOffsets(admin, topic) {
  return byPartition(await admin.fetchTopicOffsets(topic), p => ({ low: Number(p.low), high: Number(p.high) }))
}

/** The group's committed offsets as KafkaJS reports them (-1: none), by partition. */
async function committed(admin, groupId, topic) {
  const [t] = await admin.fetchOffsets({ groupId, topics: [topic] })
  return byPartition(t.partitions, p => Number(p.offset))
}

module.exports = { runAdmin }
