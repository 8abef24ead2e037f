package sluice.check;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.util.HashMap;
import java.util.Map;

/**
 * What Java users do against a Kafka broker, as one program with subcommands, each printing
 * one JSON object on stdout for tests/e2e/test_java_client.py to assert on:
 *
 * <pre>
 *   codecs  --bootstrap B --topic T --records N   every codec, acks=all, idempotent, read back byte-exact
 *   group   --bootstrap B --topic T --records N [--protocol classic|consumer]
 *                                                 two members of one group protocol: join, split, leave
 *   admin   --bootstrap B --topic T               the AdminClient calls a service makes
 *   txn     --bootstrap B --topic T               commit, abort, read_committed, fencing
 *   regex   --bootstrap B --topic T               group.protocol=consumer with a broker-side regex
 *   restart --bootstrap B --topic T --records N   a group.protocol=consumer member across a broker restart
 *   token-create|token-use|token-manage|token-expire ...   delegation tokens (Tokens.java)
 * </pre>
 *
 * A failed check is data in the JSON (the test asserts on it), an exception escaping a
 * subcommand is a crash: exit 1 with the stack trace on stderr.
 */
public final class Main {
    private Main() {}

    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            usage();
        }
        Map<String, String> args = parseFlags(argv);
        String bootstrap = required(args, "bootstrap");
        String topic = required(args, "topic");
        int records = Integer.parseInt(args.getOrDefault("records", "300"));
        Map<String, Object> out =
                switch (argv[0]) {
                    case "codecs" -> Codecs.run(bootstrap, topic, records);
                    case "group" -> Group.run(bootstrap, topic, records, args.getOrDefault("protocol", "classic"));
                    case "admin" -> AdminCalls.run(bootstrap, topic);
                    case "txn" -> Transactions.run(bootstrap, topic);
                    case "regex" -> RegexSubscription.run(bootstrap, topic);
                    case "restart" -> RestartSurvivor.run(bootstrap, topic, records);
                    case "token-create" -> Tokens.create(args);
                    case "token-use" -> Tokens.use(args, records);
                    case "token-manage" -> Tokens.manage(args);
                    case "token-expire" -> Tokens.expire(args);
                    default -> usage();
                };
        ObjectMapper json = new ObjectMapper().enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS);
        System.out.println(json.writeValueAsString(out));
        // The clients' daemon threads are closed; this only makes the exit prompt.
        System.exit(0);
    }

    private static Map<String, String> parseFlags(String[] argv) {
        Map<String, String> flags = new HashMap<>();
        for (int i = 1; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                usage();
            }
            flags.put(argv[i].substring(2), argv[i + 1]);
        }
        return flags;
    }

    private static String required(Map<String, String> args, String name) {
        String value = args.get(name);
        if (value == null) {
            usage();
        }
        return value;
    }

    private static <T> T usage() {
        System.err.println("usage: java-check codecs|group|admin|txn|regex|restart|token-* --bootstrap HOST:PORT --topic NAME"
                + " [--records N] [--protocol classic|consumer]");
        System.exit(2);
        throw new AssertionError("unreachable");
    }
}
