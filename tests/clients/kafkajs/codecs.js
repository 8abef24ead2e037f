// The codecs scenario, and the codecs KafkaJS lacks. KafkaJS builds in gzip only; snappy, lz4
// and zstd are plugged into CompressionCodecs, each pure JavaScript (tests/clients/build.sh
// installs with --ignore-scripts, so nothing native is built):
//   snappy  kafkajs-snappy (snappyjs; reads raw and xerial-framed snappy)
//   lz4     lz4js: Kafka's LZ4 is the LZ4 frame format (KIP-57), which lz4js writes and reads
//   zstd    zstd-codec: the reference zstd compiled to JavaScript with Emscripten
'use strict'

const fs = require('node:fs')
const { CompressionTypes, CompressionCodecs } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')
const { ZstdCodec } = require('zstd-codec')
const { kafka, waitFor } = require('./common')

let zstdReady = null

/** zstd-codec's Emscripten module starts asynchronously, once. */
function zstd() {
  zstdReady ??= new Promise(resolve => ZstdCodec.run(z => resolve(new z.Streaming())))
  return zstdReady
}

const Lz4Codec = () => ({
  async compress(encoder) {
    return Buffer.from(lz4.compress(encoder.buffer))
  },
  async decompress(buffer) {
    return Buffer.from(lz4.decompress(buffer))
  },
})

const ZstdCodecForKafkaJS = () => ({
  async compress(encoder) {
    const out = (await zstd()).compress(encoder.buffer)
    if (!out) throw new Error('zstd-codec could not compress')
    return Buffer.from(out)
  },
  // Streaming decompression: a frame need not carry its content size.
  async decompress(buffer) {
    const out = (await zstd()).decompress(buffer)
    if (!out) throw new Error('zstd-codec could not decompress')
    return Buffer.from(out)
  },
})

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = Lz4Codec
CompressionCodecs[CompressionTypes.ZSTD] = ZstdCodecForKafkaJS

const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

const fromB64 = s => (s === null ? null : Buffer.from(s, 'base64'))
const toB64 = b => (b === null || b === undefined ? null : b.toString('base64'))

/** A spec record as a KafkaJS message: repeated header keys become an array of values. */
function toMessage(partition, r) {
  const headers = {}
  for (const h of r.headers) {
    const value = fromB64(h.value)
    headers[h.key] = h.key in headers ? [].concat(headers[h.key], value) : value
  }
  return { partition, key: fromB64(r.key), value: fromB64(r.value), headers }
}

/** KafkaJS's header object back to the [{key, value}] list, in the order they were read. */
function headerList(headers) {
  return Object.entries(headers).flatMap(([key, v]) =>
    (Array.isArray(v) ? v : [v]).map(value => ({ key, value: toB64(value) }))
  )
}

// runCodecs: each spec partition produced with its codec by one send() of an idempotent
// producer (acks=all), which reports the batch's base offset; then a consumer group reads
// the topic from the beginning until it has every record.
async function runCodecs(flags) {
  const spec = JSON.parse(fs.readFileSync(flags.spec, 'utf8'))
  const client = kafka(flags)
  const produced = {}
  const producer = client.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  try {
    for (const p of spec.partitions) {
      const [meta] = await producer.send({
        topic: spec.topic,
        acks: -1,
        compression: COMPRESSION[p.codec],
        messages: p.records.map(r => toMessage(p.partition, r)),
      })
      const base = Number(meta.baseOffset)
      produced[p.codec] = p.records.map((_, i) => ({ partition: meta.partition, offset: base + i }))
    }
  } finally {
    await producer.disconnect()
  }
  const want = spec.partitions.reduce((n, p) => n + p.records.length, 0)
  const consumed = []
  const consumer = client.consumer({ groupId: `${spec.topic}-codecs`, maxWaitTimeInMs: 200 })
  await consumer.connect()
  try {
    await consumer.subscribe({ topic: spec.topic, fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        consumed.push({
          partition,
          offset: Number(message.offset),
          key: toB64(message.key),
          value: toB64(message.value),
          headers: headerList(message.headers),
        })
      },
    })
    await waitFor(flags.deadline, `${want} records`, () => consumed.length >= want)
  } finally {
    await consumer.disconnect()
  }
  return { produced, consumed }
}

module.exports = { runCodecs }
