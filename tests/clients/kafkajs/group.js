// The group scenario: member a alone, then b joins (the partitions split), then b leaves (a
// takes all back), each phase producing perPhase records and waiting until they are all
// consumed; then a leaves and a new member c must start exactly at the committed offsets.
//
// Each member is a KafkaJS consumer as services run it: eachMessage with autoCommit, here
// with autoCommitThreshold 1 so every record's offset is committed before the next one is
// handed out, and KafkaJS commits what it resolved when a heartbeat finds a rebalance. A
// partition therefore changes owner at a committed offset.
'use strict'

const { AssignerProtocol } = require('kafkajs')
const { kafka, waitFor } = require('./common')

// Short enough that a rebalance is noticed within a second (KafkaJS heartbeats between
// messages and after empty fetches).
const CONSUMER_CONFIG = {
  sessionTimeout: 10000,
  rebalanceTimeout: 10000,
  heartbeatInterval: 300,
  maxWaitTimeInMs: 200,
}

class Member {
  constructor(run, name) {
    this.run = run
    this.name = name
    this.assigned = []
    this.left = false
    this.error = null
    this.consumer = kafka(run.flags, `member-${name}`).consumer({ groupId: run.group, ...CONSUMER_CONFIG })
    const { GROUP_JOIN, REBALANCING, CRASH } = this.consumer.events
    this.consumer.on(GROUP_JOIN, e => {
      this.assigned = [...(e.payload.memberAssignment[run.topic] || [])].sort((x, y) => x - y)
    })
    this.consumer.on(REBALANCING, () => {
      this.assigned = []
    })
    this.consumer.on(CRASH, e => {
      this.error ??= `${name} crashed: ${e.payload.error.message}`
    })
  }

  async start() {
    await this.consumer.connect()
    await this.consumer.subscribe({ topic: this.run.topic, fromBeginning: true })
    await this.consumer.run({
      autoCommit: true,
      autoCommitThreshold: 1,
      eachMessage: async ({ partition, message }) => {
        this.run.consumed.push({
          member: this.name,
          phase: this.run.phase,
          partition,
          offset: Number(message.offset),
          value: message.value.toString(),
        })
      },
    })
  }

  /** disconnect() stops the runner, commits, and sends LeaveGroup. */
  async leave() {
    this.left = true
    await this.consumer.disconnect()
    this.assigned = []
  }
}

class GroupRun {
  constructor(flags, partitions, producer, admin) {
    Object.assign(this, { flags, partitions, producer, admin })
    this.topic = flags.topic
    this.group = flags.group
    this.phase = ''
    this.members = []
    this.produced = 0
    this.consumed = []
    this.assignments = {}
    this.described = {}
  }

  async join(name) {
    const m = new Member(this, name)
    this.members.push(m)
    await m.start()
    return m
  }

  owns(m, n) {
    return n < 0 ? m.assigned.length > 0 : m.assigned.length === n
  }

  /** a and b together hold every partition, none twice. */
  covered(a, b) {
    const all = [...a.assigned, ...b.assigned]
    return new Set(all).size === all.length && all.length === this.partitions
  }

  /** Waits for the assignment, records it and DescribeGroups' view, produces n records
   * round-robin over the partitions, waits until every record so far is consumed. */
  async runPhase(name, n, assignment) {
    this.phase = name
    await this.waitMembers(`the ${name} assignment`, assignment)
    this.assignments[name] = {}
    for (const m of this.members.filter(m => !m.left)) {
      this.assignments[name][m.name] = m.assigned
    }
    this.described[name] = await this.describe()
    const messages = Array.from({ length: n }, (_, i) => ({
      partition: i % this.partitions,
      value: `${name}-${i}`,
    }))
    await this.producer.send({ topic: this.topic, acks: -1, messages })
    this.produced += n
    await this.waitMembers(`every record of ${name}`, () => this.consumed.length >= this.produced)
  }

  async describe() {
    const { groups } = await this.admin.describeGroups([this.group])
    const g = groups[0]
    const members = {}
    for (const m of g.members) {
      const assignment = AssignerProtocol.MemberAssignment.decode(m.memberAssignment)
      members[m.clientId] = (assignment?.assignment[this.topic] || []).sort((x, y) => x - y)
    }
    return { state: g.state, protocol: g.protocol, protocolType: g.protocolType, members }
  }

  /** waitFor that also stops on a member's crash. */
  waitMembers(what, cond) {
    return waitFor(this.flags.deadline, what, () => this.members.some(m => m.error) || cond())
  }

  async phases(perPhase) {
    const a = await this.join('a')
    await this.runPhase('alone', perPhase, () => this.owns(a, this.partitions))
    const b = await this.join('b')
    await this.runPhase('shared', perPhase, () => this.owns(a, -1) && this.owns(b, -1) && this.covered(a, b))
    await b.leave()
    await this.runPhase('after-leave', perPhase, () => this.owns(a, this.partitions))
    await a.leave()
    const c = await this.join('c')
    await this.runPhase('late-member', 4, () => this.owns(c, this.partitions))
  }

  async result() {
    const committed = {}
    const logEnd = {}
    const errors = this.members.filter(m => m.error).map(m => m.error)
    try {
      const [offsets] = await this.admin.fetchOffsets({ groupId: this.group, topics: [this.topic] })
      for (const p of offsets.partitions) committed[p.partition] = Number(p.offset)
      for (const p of await this.admin.fetchTopicOffsets(this.topic)) logEnd[p.partition] = Number(p.high)
    } catch (e) {
      errors.push(`fetching offsets: ${e.message}`)
    }
    return {
      produced: this.produced,
      consumed: this.consumed,
      assignments: this.assignments,
      described: this.described,
      committed,
      log_end: logEnd,
      member_errors: errors,
    }
  }
}

async function runGroup(flags) {
  const client = kafka(flags)
  const admin = client.admin()
  const producer = client.producer()
  await Promise.all([admin.connect(), producer.connect()])
  const { topics } = await admin.fetchTopicMetadata({ topics: [flags.topic] })
  const run = new GroupRun(flags, topics[0].partitions.length, producer, admin)
  let failure = null
  try {
    await run.phases(Number(flags['per-phase']))
  } catch (e) {
    failure = e
  }
  // Every member leaves first: the committed offsets are read from an Empty group.
  await Promise.all(run.members.filter(m => !m.left).map(m => m.leave()))
  const out = await run.result()
  await Promise.all([admin.disconnect(), producer.disconnect()])
  if (failure) {
    failure.partialResult = out
    throw failure
  }
  return out
}

module.exports = { runGroup }
