package sluice.check;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateDelegationTokenOptions;
import org.apache.kafka.clients.admin.DescribeDelegationTokenOptions;
import org.apache.kafka.clients.admin.ExpireDelegationTokenOptions;
import org.apache.kafka.clients.admin.RenewDelegationTokenOptions;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;

/**
 * Delegation tokens (KIP-48) as a Java service uses them, over SASL_PLAINTEXT with
 * SCRAM-SHA-512: a user's AdminClient creates a token, a producer and a consumer log in with
 * it (`tokenauth=true`), the renewer renews it, the owner expires it.
 *
 * <pre>
 *   token-create --bootstrap SASL --topic T --user U --password P --renewer R
 *       creates a token for U, renewable by User:R; prints its id, HMAC and times
 *   token-use --bootstrap SASL --topic T --token-id I --hmac H --records N
 *       produces and consumes N records logged in with the token, lists the topics it may
 *       see, and tries to create a token with it
 *   token-manage --bootstrap SASL --plain-bootstrap PLAIN --topic T --user U --password P
 *       --renewer R --renewer-password RP --hmac H
 *       describes (as owner, as renewer, filtered by owner), renews as the renewer, and tries
 *       to create a token over PLAINTEXT
 *   token-expire --bootstrap SASL --topic T --user U --password P --token-id I --hmac H
 *       expires the token now, then tries to log in with it
 * </pre>
 */
final class Tokens {
    private Tokens() {}

    private static final String SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule";

    private static Map<String, Object> sasl(String user, String password, boolean token) {
        String jaas = SCRAM + " required username=\"" + user + "\" password=\"" + password + "\""
                + (token ? " tokenauth=\"true\"" : "") + ";";
        Map<String, Object> props = new LinkedHashMap<>();
        props.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        props.put(SaslConfigs.SASL_MECHANISM, "SCRAM-SHA-512");
        props.put(SaslConfigs.SASL_JAAS_CONFIG, jaas);
        return props;
    }

    private static Admin admin(String bootstrap, Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 20_000);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        p.putAll(extra);
        return Admin.create(p);
    }

    /** The class name of what `call` throws (its cause, for a future's), or "none". */
    private static String failure(ThrowingRunnable call) {
        try {
            call.run();
            return "none";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    @FunctionalInterface
    interface ThrowingRunnable {
        void run() throws Exception;
    }

    private static Map<String, Object> describe(DelegationToken token) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("token_id", token.tokenInfo().tokenId());
        out.put("hmac", token.hmacAsBase64String());
        out.put("owner", token.tokenInfo().owner().toString());
        out.put("requester", token.tokenInfo().tokenRequester().toString());
        List<String> renewers = new ArrayList<>();
        token.tokenInfo().renewers().forEach(r -> renewers.add(r.toString()));
        out.put("renewers", renewers);
        out.put("issue_ms", token.tokenInfo().issueTimestamp());
        out.put("expiry_ms", token.tokenInfo().expiryTimestamp());
        out.put("max_ms", token.tokenInfo().maxTimestamp());
        return out;
    }

    static Map<String, Object> create(Map<String, String> args) throws Exception {
        try (Admin admin = admin(args.get("bootstrap"), sasl(args.get("user"), args.get("password"), false))) {
            KafkaPrincipal renewer = new KafkaPrincipal(KafkaPrincipal.USER_TYPE, args.get("renewer"));
            try {
                DelegationToken token = admin.createDelegationToken(
                                new CreateDelegationTokenOptions().renewers(List.of(renewer)))
                        .delegationToken()
                        .get();
                return describe(token);
            } catch (ExecutionException e) {
                return Map.of("error", e.getCause().getClass().getSimpleName());
            }
        }
    }

    static Map<String, Object> use(Map<String, String> args, int records) throws Exception {
        String bootstrap = args.get("bootstrap");
        String topic = args.get("topic");
        Map<String, Object> login = sasl(args.get("token-id"), args.get("hmac"), true);
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap, login)) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, ("token-" + i).getBytes(StandardCharsets.UTF_8)))
                        .get();
            }
        }
        out.put("produced", records);
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap, login)) {
            List<ConsumerRecord<byte[], byte[]>> got =
                    Clients.readFromStart(consumer, List.of(new TopicPartition(topic, 0)), records);
            List<String> values = new ArrayList<>();
            got.forEach(r -> values.add(new String(r.value(), StandardCharsets.UTF_8)));
            out.put("consumed", values);
        }
        try (Admin admin = admin(bootstrap, login)) {
            out.put("topics_listed", new ArrayList<>(admin.listTopics().names().get()));
            out.put("create_with_token", failure(() -> admin.createDelegationToken().delegationToken().get()));
        }
        return out;
    }

    static Map<String, Object> manage(Map<String, String> args) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        byte[] hmac = Base64.getDecoder().decode(args.get("hmac"));
        KafkaPrincipal owner = new KafkaPrincipal(KafkaPrincipal.USER_TYPE, args.get("user"));
        KafkaPrincipal stranger = new KafkaPrincipal(KafkaPrincipal.USER_TYPE, "nobody");
        try (Admin asOwner = admin(args.get("bootstrap"), sasl(args.get("user"), args.get("password"), false));
                Admin asRenewer = admin(
                        args.get("bootstrap"), sasl(args.get("renewer"), args.get("renewer-password"), false))) {
            out.put("owner_sees", ids(asOwner.describeDelegationToken().delegationTokens().get()));
            out.put("renewer_sees", ids(asRenewer.describeDelegationToken().delegationTokens().get()));
            out.put("owner_filter", ids(asOwner.describeDelegationToken(
                            new DescribeDelegationTokenOptions().owners(List.of(owner)))
                    .delegationTokens()
                    .get()));
            out.put("stranger_filter", ids(asOwner.describeDelegationToken(
                            new DescribeDelegationTokenOptions().owners(List.of(stranger)))
                    .delegationTokens()
                    .get()));
            try {
                long renewed = asRenewer.renewDelegationToken(hmac, new RenewDelegationTokenOptions()
                                .renewTimePeriodMs(Duration.ofHours(2).toMillis()))
                        .expiryTimestamp()
                        .get();
                out.put("renewed_expiry_ms", renewed);
            } catch (ExecutionException e) {
                out.put("renewed_expiry_ms", e.getCause().getClass().getSimpleName());
            }
            out.put("renew_unknown", failure(() -> asOwner.renewDelegationToken(new byte[64])
                    .expiryTimestamp()
                    .get()));
        }
        try (Admin plain = admin(args.get("plain-bootstrap"), Map.of())) {
            out.put("create_over_plaintext", failure(() -> plain.createDelegationToken().delegationToken().get()));
        }
        return out;
    }

    static Map<String, Object> expire(Map<String, String> args) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        byte[] hmac = Base64.getDecoder().decode(args.get("hmac"));
        try (Admin asOwner = admin(args.get("bootstrap"), sasl(args.get("user"), args.get("password"), false))) {
            long at = asOwner.expireDelegationToken(hmac, new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1))
                    .expiryTimestamp()
                    .get();
            out.put("expired_at_ms", at);
            out.put("left", ids(asOwner.describeDelegationToken().delegationTokens().get()));
        }
        Map<String, Object> login = sasl(args.get("token-id"), args.get("hmac"), true);
        try (Admin withToken = admin(args.get("bootstrap"), login)) {
            out.put("login_after_expiry", failure(() -> withToken.describeCluster().clusterId().get()));
        }
        return out;
    }

    private static List<String> ids(List<DelegationToken> tokens) {
        List<String> out = new ArrayList<>();
        tokens.forEach(t -> out.add(t.tokenInfo().tokenId()));
        return out;
    }
}
