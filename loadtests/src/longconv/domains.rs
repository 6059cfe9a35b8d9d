//! What the long conversations are about: two assistants' domains (a coding
//! project, an event being planned), each with the facts a user states, the
//! questions that ask for them in other words, and the vocabulary of the
//! assistant's long replies. `{v}` is a value, `{old}` the value it replaces,
//! `{n}` a number.

/// A fact with one value of several, stated once, perhaps changed later.
pub struct Slot {
    pub values: &'static [&'static str],
    /// How the user states it.
    pub says: &'static [&'static str],
    /// How the user changes it from `{old}` to `{v}`.
    pub changes: &'static [&'static str],
    /// Questions that ask for it, sharing few words with `says`.
    pub asks: &'static [&'static str],
    /// The assistant's sentences about it with `{a}` and `{b}` for two of
    /// its values: distractors that share the questions' words.
    pub talk: &'static [&'static str],
}

/// A number the user gives twice, differently, without saying it changed.
pub struct Number {
    pub low: u32,
    pub high: u32,
    pub says: &'static [&'static str],
    pub asks: &'static [&'static str],
}

/// Something that happened on a session's day.
pub struct Milestone {
    pub says: &'static str,
    /// The event in other words, for "when" and "which came first".
    pub phrase: &'static str,
}

/// A statement and the question that asks for it.
pub struct Said {
    pub says: &'static str,
    pub asks: &'static str,
}

/// A list whose items are stated in different sessions.
pub struct Multi {
    pub items: &'static [&'static str],
    pub says: &'static [&'static str],
    pub asks: &'static [&'static str],
}

/// Steps of one thread of work, in order, and questions asking for an overview.
pub struct Thread {
    pub steps: &'static [&'static str],
    pub asks: &'static [&'static str],
}

pub struct Domain {
    pub projects: &'static [&'static str],
    pub slots: &'static [Slot],
    pub numbers: &'static [Number],
    pub milestones: &'static [Milestone],
    pub preferences: &'static [Said],
    pub instructions: &'static [Said],
    pub multis: &'static [Multi],
    pub threads: &'static [Thread],
    /// The assistant's general sentences about the domain.
    pub talk: &'static [&'static str],
    /// User turns that carry no fact.
    pub chatter: &'static [&'static str],
    /// Nouns and verbs for generated code or schedules.
    pub nouns: &'static [&'static str],
    pub verbs: &'static [&'static str],
    /// Whether replies carry code (else schedules and checklists).
    pub code: bool,
}

pub const CODING: Domain = Domain {
    projects: &[
        "an invoicing web service",
        "a warehouse inventory API",
        "a recipe sharing app",
        "a fleet tracking backend",
        "a course enrolment portal",
    ],
    slots: &[
        Slot {
            values: &["PostgreSQL", "MySQL", "SQLite", "MongoDB", "CockroachDB"],
            says: &[
                "We went with {v} for persistence, mostly because the ops folks already babysit it.",
                "I provisioned a {v} instance yesterday, so tables live there from now on.",
            ],
            changes: &[
                "Change of plan on storage: we are dropping {old} and moving the tables to {v}; the licence terms pushed us.",
                "Heads up, {old} is out. Legal and ops agreed on {v} for the records instead.",
            ],
            asks: &[
                "Which database engine holds the application's records?",
                "Where is the app's data stored?",
            ],
            talk: &[
                "Both {a} and {b} can store the application's records; the difference shows in backups, replication and how migrations are rolled out.",
                "Wherever the data is stored, {a} or {b}, keep the schema in version control and test restores.",
            ],
        },
        Slot {
            values: &["Axum", "Actix Web", "FastAPI", "Django", "Express"],
            says: &[
                "The HTTP layer is going to be {v}; I like its routing and the docs are decent.",
                "I scaffolded the endpoints with {v} last night.",
            ],
            changes: &[
                "I ripped out {old} today and rewrote the handlers on {v}. Fewer surprises in middleware.",
                "We are switching the handlers from {old} to {v} after the benchmark fiasco.",
            ],
            asks: &[
                "What web framework serves the API?",
                "Which library answers incoming requests on the server side?",
            ],
            talk: &[
                "If you compare {a} with {b} for answering incoming requests, the routing model and middleware story matter more than raw speed.",
                "A web framework like {a} or {b} should stay at the edge of the API, with the domain logic in plain modules.",
            ],
        },
        Slot {
            values: &["Fly.io", "AWS ECS", "Hetzner bare metal", "Google Cloud Run", "Render"],
            says: &[
                "Production will sit on {v}, the invoice from them is the cheapest we found.",
                "I signed us up for {v}; staging goes there first and prod after.",
            ],
            changes: &[
                "Billing surprise: we are leaving {old} and redeploying everything on {v} next sprint.",
                "Scrap {old}. Finance approved {v}, so the containers go there.",
            ],
            asks: &[
                "Where is the service hosted?",
                "Which cloud or provider runs the deployment?",
            ],
            talk: &[
                "Hosting on {a} versus {b} mostly comes down to cost, cold starts and how much of the deployment you want to operate yourselves.",
                "Whichever provider runs the service, {a} or {b}, script the deployment so that it can be recreated.",
            ],
        },
        Slot {
            values: &["GitHub Actions", "GitLab CI", "Buildkite", "CircleCI", "Jenkins"],
            says: &[
                "Every push triggers {v} now, with lint, tests and a build job.",
                "I wired the repo into {v} so pull requests get checked automatically.",
            ],
            changes: &[
                "We migrated the pipelines off {old} to {v}; the runners were too flaky.",
                "Goodbye {old}: the workflow files are ported to {v} as of this morning.",
            ],
            asks: &[
                "What continuous integration system checks each commit?",
                "Which tool verifies pull requests before merge?",
            ],
            talk: &[
                "A continuous integration setup like {a} or {b} should check each commit with lint, tests and a reproducible build.",
                "Pull requests verified by {a} or {b} merge faster when the checks finish in under ten minutes.",
            ],
        },
        Slot {
            values: &[
                "passkeys",
                "magic links sent by email",
                "Google OAuth",
                "SAML single sign-on",
                "username and password with TOTP",
            ],
            says: &[
                "Customers will log in with {v}; support hates password resets.",
                "For accounts, {v} is what we settled on after the security review.",
            ],
            changes: &[
                "Security review flipped it: no more {old}, people authenticate with {v}.",
                "Replacing {old} with {v} for sign-in, enterprise clients asked for it.",
            ],
            asks: &[
                "How do users authenticate to the product?",
                "What sign-in method was chosen?",
            ],
            talk: &[
                "For sign-in, {a} and {b} trade convenience for support load; think about account recovery before you commit.",
                "However users authenticate, {a} or {b}, rate-limit the endpoints and log failed attempts.",
            ],
        },
        Slot {
            values: &["Redis", "Memcached", "an in-process LRU", "Varnish"],
            says: &[
                "Hot lookups go through {v} in front of the tables.",
                "I put {v} between the handlers and storage to shave the p95.",
            ],
            changes: &[
                "Removed {old}; {v} does the job with less to operate.",
                "We are swapping {old} for {v} in front of the reads.",
            ],
            asks: &[
                "What caching layer speeds up repeated reads?",
                "Which component keeps frequently requested results in memory?",
            ],
            talk: &[
                "A caching layer such as {a} or {b} helps repeated reads, but invalidation is where the bugs hide.",
                "Keeping frequently requested results in memory with {a} or {b} needs a clear expiry policy.",
            ],
        },
        Slot {
            values: &["RabbitMQ", "NATS", "Amazon SQS", "Kafka", "Sidekiq"],
            says: &[
                "Background jobs travel over {v}; workers pull from there.",
                "Emails and PDF rendering get queued on {v} so requests return fast.",
            ],
            changes: &[
                "The async jobs now go through {v}; {old} kept losing messages on restart.",
                "Replaced {old} with {v} for the worker pipeline.",
            ],
            asks: &[
                "What message broker carries the asynchronous tasks?",
                "Which system hands deferred work to the worker processes?",
            ],
            talk: &[
                "Deferred work can ride on {a} or {b}; what matters is delivery guarantees and what happens to a message when a worker crashes.",
                "With a message broker like {a} or {b}, make every asynchronous task idempotent.",
            ],
        },
        Slot {
            values: &["Python 3.12", "Rust 1.83", "Go 1.23", "TypeScript on Node 22", "Kotlin"],
            says: &[
                "The backend is written in {v}, that is what the team knows best.",
                "Decided: {v} for the server code.",
            ],
            changes: &[
                "We are porting the backend from {old} to {v}; hiring is easier.",
                "New direction, {old} goes away and the services are rewritten in {v}.",
            ],
            asks: &[
                "What programming language is the backend implemented in?",
                "Which language does the server-side code use?",
            ],
            talk: &[
                "The language matters less than the team's fluency: {a} and {b} both run a service like this comfortably.",
                "Server-side code in {a} or {b} benefits from the same discipline: small modules, typed errors, tests.",
            ],
        },
        Slot {
            values: &["Grafana with Prometheus", "Datadog", "Honeycomb", "New Relic", "Sentry"],
            says: &[
                "Metrics and traces end up in {v}; the on-call rota looks there.",
                "I hooked up {v} so we see error spikes.",
            ],
            changes: &[
                "Observability moves from {old} to {v} at the end of the month, cost again.",
                "We cancelled {old}; dashboards are being rebuilt in {v}.",
            ],
            asks: &[
                "What monitoring product does the team watch for incidents?",
                "Where do the dashboards and alerts live?",
            ],
            talk: &[
                "Monitoring with {a} or {b} is only as good as the alerts: page on symptoms users feel, not on every CPU spike.",
                "Dashboards in {a} or {b} should show latency, errors and saturation per endpoint.",
            ],
        },
    ],
    numbers: &[
        Number {
            low: 3,
            high: 14,
            says: &[
                "We are {n} engineers on this, counting me.",
                "With {n} developers we can't afford a microservice zoo.",
            ],
            asks: &["Has the user been consistent about how large the development team is?"],
        },
        Number {
            low: 2,
            high: 20,
            says: &[
                "The budget for infrastructure is {n} thousand dollars a year.",
                "Remember we only have {n}k a year for servers.",
            ],
            asks: &["Did the user give conflicting figures for the hosting spend?"],
        },
        Number {
            low: 50,
            high: 900,
            says: &[
                "We expect about {n} requests per second at peak.",
                "Peak traffic should be roughly {n} rps according to marketing.",
            ],
            asks: &["Were there inconsistent estimates of the expected load?"],
        },
    ],
    milestones: &[
        Milestone {
            says: "Finally got the pipeline green on main today, all checks pass.",
            phrase: "the automated build first succeed",
        },
        Milestone {
            says: "I merged the schema migration for the ledger tables this afternoon.",
            phrase: "the accounting data model change land",
        },
        Milestone {
            says: "The beta went live to twenty pilot customers this morning.",
            phrase: "the product open to its first outside users",
        },
        Milestone {
            says: "We had our first production outage today, the disk filled up at 3am.",
            phrase: "the service first go down in production",
        },
        Milestone {
            says: "I cut the 1.0 tag and published the release notes.",
            phrase: "the first stable version ship",
        },
        Milestone {
            says: "Our new hire Dana started today and already fixed a flaky test.",
            phrase: "the newest team member join",
        },
        Milestone {
            says: "Passed the penetration test with only two low findings.",
            phrase: "the external security audit conclude",
        },
        Milestone {
            says: "Load test hit the target throughput for the first time today.",
            phrase: "the performance goal first get reached",
        },
    ],
    preferences: &[
        Said {
            says: "Honestly I can't stand ORMs. Give me hand-written SQL any day.",
            asks: "How does the user feel about object-relational mappers and query builders?",
        },
        Said {
            says: "I find long functions exhausting to review, anything over forty lines makes me grumpy.",
            asks: "What is the user's taste regarding routine size?",
        },
        Said {
            says: "I'm much happier with early returns than with nested if-else pyramids.",
            asks: "What control-flow style does the user like?",
        },
        Said {
            says: "I'd rather have a boring monolith than a dozen tiny services.",
            asks: "What architecture does the user lean toward?",
        },
        Said {
            says: "Dark mode in every tool, my eyes burn otherwise.",
            asks: "Which colour theme does the user want in their editor?",
        },
        Said {
            says: "I really prefer property-based tests over piles of hand-picked examples.",
            asks: "What testing approach appeals to the user most?",
        },
        Said {
            says: "Spaces, never tabs, and a line limit of 100 columns.",
            asks: "How does the user like source files indented and wrapped?",
        },
        Said {
            says: "I love when explanations come with a small diagram, even ASCII.",
            asks: "What kind of visual aids does the user appreciate?",
        },
    ],
    instructions: &[
        Said {
            says: "From now on, write commit messages in the imperative mood, like 'Add retry'.",
            asks: "What rule did the user set for describing changes in version control?",
        },
        Said {
            says: "Always include type annotations in any snippet you show me.",
            asks: "What must every code example contain according to the user?",
        },
        Said {
            says: "Never suggest adding a dependency without asking me first.",
            asks: "What should the assistant check before proposing a third-party library?",
        },
        Said {
            says: "When you answer, put the shell commands in a single block at the end.",
            asks: "How did the user want terminal instructions laid out?",
        },
        Said {
            says: "Keep replies under a page unless I explicitly ask for depth.",
            asks: "What length limit did the user request for responses?",
        },
        Said {
            says: "Please flag anything that touches customer PII with a warning line.",
            asks: "What did the user ask the assistant to mark when personal data is involved?",
        },
        Said {
            says: "Use British spelling in docs, our clients are in London.",
            asks: "Which orthography should documentation follow?",
        },
        Said {
            says: "Before proposing a refactor, tell me how you would test it.",
            asks: "What must precede any restructuring suggestion?",
        },
    ],
    multis: &[
        Multi {
            items: &["Stripe", "Twilio", "SendGrid", "Mapbox", "Algolia", "Plaid"],
            says: &[
                "We also need to talk to {v}, sales promised that integration.",
                "Add {v} to the list of APIs we call out to.",
            ],
            asks: &[
                "Which external vendors does the product integrate with?",
                "List the outside services the backend connects to.",
            ],
        },
        Multi {
            items: &["Marcus", "Ingrid", "Tomasz", "Yuki", "Beatriz", "Kwame"],
            says: &[
                "{v} owns the frontend bits, loop them in on UI changes.",
                "{v} will review anything that touches billing.",
            ],
            asks: &[
                "Who are the colleagues the user mentioned working with?",
                "Name the teammates involved in the project.",
            ],
        },
    ],
    threads: &[
        Thread {
            steps: &[
                "The search endpoint takes 800 ms at p99, way too slow for the dashboard.",
                "Adding a composite index cut that endpoint to 300 ms at p99.",
                "With the cache warmed, the endpoint is at 90 ms p99 now.",
                "Load test confirms search holds under 100 ms at twice the traffic.",
            ],
            asks: &["Give an overview of how the latency problem evolved over the sessions."],
        },
        Thread {
            steps: &[
                "Customers report duplicate invoices when they double-click pay.",
                "I added an idempotency key to the payment call, duplicates dropped a lot.",
                "Still one duplicate this week, from a retry in the worker.",
                "No duplicates for three weeks after deduplicating retries in the worker too.",
            ],
            asks: &["Summarise the history of the double-charging bug."],
        },
        Thread {
            steps: &[
                "Our test suite takes 25 minutes, people stopped running it locally.",
                "Split the suite into shards, CI time is 11 minutes.",
                "Replaced the database fixtures with transactions, now 6 minutes.",
            ],
            asks: &["Recap what happened with how long verification takes."],
        },
    ],
    talk: &[
        "Keep the data model boring: explicit columns, foreign keys where they help, and migrations that can run twice.",
        "Before you optimise, measure: a flame graph of the slow endpoint usually points at one query or one allocation.",
        "Error handling deserves its own type per module, so that the caller can decide what to retry.",
        "Configuration should come from the environment with sane defaults, and the service should refuse to start on a bad value.",
        "Integration tests against the real database catch what mocks hide, at the cost of a slower suite.",
        "Pagination by cursor is steadier than by offset once tables grow past a few hundred thousand rows.",
        "Rate limiting belongs at the edge, keyed by account, with a clear error that says when to retry.",
        "Structured logs with a request id make the on-call engineer's night shorter.",
        "Feature flags let you merge early and release later, but remove them once the rollout is done.",
    ],
    chatter: &[
        "Okay, that makes sense. What would you do next?",
        "Can you walk me through that last part again?",
        "Thanks, that helped. Let's move on to the next thing.",
        "Hmm, I'm not sure about that approach, what are the trade-offs?",
        "Could you show me a smaller example?",
        "Good. Can you write the tests for it too?",
        "That compiles now. One more question about error handling.",
        "What would break if we did it the other way around?",
        "Let's pause here, I'll try it and report back.",
        "Can you review this function for me?",
    ],
    nouns: &[
        "invoice", "customer", "ledger", "payment", "account", "order", "report", "session", "token", "worker",
        "queue", "record", "batch", "tenant", "export", "webhook", "schema", "cursor", "retry", "metric",
    ],
    verbs: &[
        "create", "load", "validate", "render", "sync", "parse", "store", "fetch", "apply", "compute", "archive",
        "notify", "resolve", "merge", "split", "encode",
    ],
    code: true,
};

pub const PLANNING: Domain = Domain {
    projects: &[
        "a three-day company offsite",
        "a product launch event",
        "a family reunion weekend",
        "a small tech conference",
        "a charity gala dinner",
    ],
    slots: &[
        Slot {
            values: &[
                "the Harbour Hall",
                "Villa Serena",
                "the old brewery on Main Street",
                "Lakeside Lodge",
                "the botanical garden pavilion",
            ],
            says: &[
                "We booked {v} for the main days, they had the only free weekend.",
                "Signed the contract with {v} this morning.",
            ],
            changes: &[
                "Bad news: {old} double-booked us, so everything moves to {v}.",
                "We cancelled {old} and took {v} instead, better access by train.",
            ],
            asks: &[
                "Where will the gathering take place?",
                "What location was reserved for the event?",
            ],
            talk: &[
                "Between {a} and {b}, the deciding factors are capacity, access by public transport and what is included in the price.",
                "Before reserving a location like {a} or {b}, ask for the floor plan and the cancellation terms.",
            ],
        },
        Slot {
            values: &[
                "Green Fork Catering",
                "Mama Rosa's kitchen",
                "a taco truck",
                "the hotel's own chef",
                "Saffron & Co",
            ],
            says: &[
                "Food is handled by {v}; the tasting went great.",
                "I hired {v} for lunch and dinner on both days.",
            ],
            changes: &[
                "{old} pulled out, so {v} is feeding everyone now.",
                "We switched from {old} to {v} after the allergy concerns.",
            ],
            asks: &[
                "Who is providing the meals?",
                "Which vendor takes care of what attendees eat?",
            ],
            talk: &[
                "Meals from {a} or {b} need a clear count of dietary requirements a week ahead.",
                "If you weigh {a} against {b} for what attendees eat, ask each for references from an event of a similar size.",
            ],
        },
        Slot {
            values: &["Lisbon", "Kraków", "Valencia", "Edinburgh", "Tallinn"],
            says: &[
                "It'll be in {v}, flights are cheap from everywhere we have people.",
                "The board picked {v} as the city.",
            ],
            changes: &[
                "Update: not {old} anymore, the vote went to {v}.",
                "We moved the whole thing from {old} to {v} because of the strike.",
            ],
            asks: &[
                "In which city does it happen?",
                "What destination was chosen for the trip?",
            ],
            talk: &[
                "A destination like {a} or {b} works when flights are direct for most people.",
                "Cities such as {a} and {b} are busy in summer, so book early.",
            ],
        },
        Slot {
            values: &[
                "a jazz trio",
                "a DJ",
                "a string quartet",
                "a stand-up comedian",
                "a magician",
            ],
            says: &[
                "For the evening we have {v} booked.",
                "I confirmed {v} for after dinner.",
            ],
            changes: &[
                "{old} cancelled, we got {v} for the evening instead.",
                "Swapping {old} for {v}, the crowd is younger than we thought.",
            ],
            asks: &[
                "What entertainment is planned for the night?",
                "Who performs after the meal?",
            ],
            talk: &[
                "Entertainment such as {a} or {b} works best when it fits the crowd's energy after dinner.",
                "Whoever performs in the evening, {a} or {b}, needs a sound check in the afternoon.",
            ],
        },
        Slot {
            values: &[
                "coaches from Fernandes Transport",
                "a fleet of shuttle vans",
                "rented bikes",
                "the regional train",
                "private taxis",
            ],
            says: &["Getting people from the airport: {v}.", "I arranged {v} for arrivals."],
            changes: &[
                "Dropping {old}; {v} are cheaper and more flexible.",
                "Transfers change from {old} to {v}.",
            ],
            asks: &[
                "How will guests get from arrival to the site?",
                "What ground transport was organised?",
            ],
            talk: &[
                "For getting people around, {a} and {b} differ mostly in flexibility when flights are late.",
                "Ground transport like {a} or {b} should have a named driver contact for arrivals.",
            ],
        },
        Slot {
            values: &[
                "Marta Kowalski",
                "Studio Lumen",
                "Jonas Weber",
                "Pixel & Grain",
                "Ana Duarte",
            ],
            says: &[
                "{v} will take the photos, their portfolio is lovely.",
                "We hired {v} as photographer for both days.",
            ],
            changes: &[
                "{old} is sick, so {v} will shoot the event.",
                "Photography moves from {old} to {v}, cheaper package.",
            ],
            asks: &[
                "Who was engaged to capture pictures?",
                "Which professional documents the occasion visually?",
            ],
            talk: &[
                "A photographer like {a} or {b} should send a shot list before the day.",
                "Pictures by {a} or {b} are worth more with a clear usage agreement.",
            ],
        },
        Slot {
            values: &[
                "Hotel Almirante",
                "the Grand Central Inn",
                "an Airbnb block on Rua Nova",
                "Hostel Oasis",
                "the Marriott by the station",
            ],
            says: &[
                "Rooms are held at {v} for everyone.",
                "Accommodation: {v}, breakfast included.",
            ],
            changes: &[
                "We moved the room block from {old} to {v}.",
                "{old} overbooked, so people sleep at {v} now.",
            ],
            asks: &["Where do attendees stay overnight?", "What lodging was reserved?"],
            talk: &[
                "Accommodation like {a} or {b} should be within walking distance of where the sessions happen.",
                "Where attendees stay overnight, {a} or {b}, ask for a late check-out on the last day.",
            ],
        },
    ],
    numbers: &[
        Number {
            low: 30,
            high: 250,
            says: &[
                "We are expecting {n} guests in total.",
                "Headcount is {n} people at the moment.",
            ],
            asks: &["Did the user give inconsistent attendance figures?"],
        },
        Number {
            low: 8,
            high: 90,
            says: &[
                "The total budget is {n} thousand euros.",
                "We can spend {n}k overall, no more.",
            ],
            asks: &["Were there contradictory amounts for how much money is available?"],
        },
        Number {
            low: 2,
            high: 5,
            says: &[
                "The programme runs for {n} days.",
                "It's a {n}-day thing, including travel.",
            ],
            asks: &["Has the user been consistent about the duration?"],
        },
    ],
    milestones: &[
        Milestone {
            says: "Sent the save-the-date emails to everybody today.",
            phrase: "the early heads-up invitations go out",
        },
        Milestone {
            says: "Paid the venue deposit this morning, it's official.",
            phrase: "the first payment for the site get made",
        },
        Milestone {
            says: "Registration opened today and forty people signed up in an hour.",
            phrase: "sign-ups start",
        },
        Milestone {
            says: "Printed the badges and lanyards, they look great.",
            phrase: "name tags get produced",
        },
        Milestone {
            says: "Had the site visit today, walked every room with the manager.",
            phrase: "the in-person inspection of the location happen",
        },
        Milestone {
            says: "The keynote speaker confirmed by email today.",
            phrase: "the headline presenter agree to come",
        },
        Milestone {
            says: "Finished the seating plan after three evenings of shuffling names.",
            phrase: "the table arrangement get completed",
        },
        Milestone {
            says: "Insurance certificate arrived, the venue needed it.",
            phrase: "the liability cover paperwork come through",
        },
    ],
    preferences: &[
        Said {
            says: "I hate early flights, nothing before 10am please.",
            asks: "What departure times does the user want to avoid?",
        },
        Said {
            says: "I'm vegetarian, so I'd love the menus to lean plant-based.",
            asks: "What dietary choice does the user follow?",
        },
        Said {
            says: "I'd rather walk between places than sit in traffic.",
            asks: "How does the user like to get around town?",
        },
        Said {
            says: "Quiet rooms matter to me more than a view.",
            asks: "What does the user value in accommodation?",
        },
        Said {
            says: "I prefer spreadsheets to fancy planning apps.",
            asks: "Which tools does the user like for organising?",
        },
        Said {
            says: "Small group dinners feel better to me than a big banquet.",
            asks: "What kind of meal setting does the user enjoy?",
        },
        Said {
            says: "I'm a big fan of local wine over cocktails.",
            asks: "What drinks does the user favour?",
        },
        Said {
            says: "Mornings are my best time, schedule hard decisions early.",
            asks: "When in the day is the user most productive?",
        },
    ],
    instructions: &[
        Said {
            says: "Always give prices in euros with VAT included.",
            asks: "How should cost figures be presented?",
        },
        Said {
            says: "Whenever you list options, put the cheapest first.",
            asks: "In what order did the user want alternatives shown?",
        },
        Said {
            says: "Never book anything non-refundable without checking with me.",
            asks: "What must the assistant confirm before committing money?",
        },
        Said {
            says: "Use 24-hour times in every schedule you draft.",
            asks: "Which clock format did the user ask for?",
        },
        Said {
            says: "Keep a running list of open decisions at the end of each answer.",
            asks: "What should close every reply?",
        },
        Said {
            says: "Mention accessibility for wheelchair users whenever you suggest a place.",
            asks: "What must be noted when recommending a location?",
        },
        Said {
            says: "Write emails to vendors in a formal tone, no exclamation marks.",
            asks: "What style should supplier correspondence have?",
        },
        Said {
            says: "Double-check time zones for anyone flying in from Asia.",
            asks: "What did the user want verified for travellers from the far east?",
        },
    ],
    multis: &[
        Multi {
            items: &[
                "a yoga session",
                "a wine tasting",
                "a boat trip",
                "a cooking class",
                "a museum tour",
                "a hike",
            ],
            says: &["Let's add {v} to the programme.", "People voted for {v}, so that's in."],
            asks: &[
                "Which activities are on the agenda?",
                "List the excursions and workshops planned.",
            ],
        },
        Multi {
            items: &[
                "Acme Corp",
                "Nordlicht GmbH",
                "Blue Finch Ventures",
                "the city council",
                "Orbit Labs",
                "Helios Bank",
            ],
            says: &["{v} agreed to sponsor part of it.", "We got {v} on board as a sponsor."],
            asks: &[
                "Which organisations are funding the occasion?",
                "Who are the backers helping pay for it?",
            ],
        },
    ],
    threads: &[
        Thread {
            steps: &[
                "The first quote from the venue was way over budget.",
                "Negotiated the venue down by fifteen percent by dropping the Sunday.",
                "Finance approved the reduced venue price.",
                "Venue invoice paid in full, one less thing to worry about.",
            ],
            asks: &["Give an overview of how the negotiations over the site's price went."],
        },
        Thread {
            steps: &[
                "Only twelve people registered in the first week, worrying.",
                "After the newsletter, registrations jumped to sixty.",
                "We're at ninety signups, almost full.",
                "Registrations closed with a waiting list of twenty.",
            ],
            asks: &["Summarise how attendance sign-ups developed over time."],
        },
        Thread {
            steps: &[
                "The visa letters for the speakers from India are stuck.",
                "Two of the visa letters came through, one still pending.",
                "All speakers have their visas now.",
            ],
            asks: &["Recap what happened with the presenters' entry paperwork."],
        },
    ],
    talk: &[
        "Budget a contingency of ten percent; something always costs more than quoted.",
        "Send a reminder a week before and another the day before, with the address and a map.",
        "A run-of-show document with times and owners keeps everyone calm on the day.",
        "Check the cancellation terms of every contract before signing.",
        "Name one person as the contact for each vendor, so messages do not get lost.",
        "Weather plans matter for anything outdoors: have a covered fallback.",
        "Collect feedback right after the event while memories are fresh.",
        "Arrival day is usually chaotic: keep the first afternoon light.",
        "Printed signs at the entrance save the organisers dozens of questions.",
    ],
    chatter: &[
        "Okay, what should I tackle next?",
        "Can you draft that as a checklist?",
        "Thanks! Could you make it a bit shorter?",
        "What am I forgetting?",
        "Can you compare those options for me?",
        "Let me check with the team and come back.",
        "Could you turn that into an email?",
        "How long before the day should this be done?",
        "What would a realistic timeline look like?",
        "Good, let's keep going.",
    ],
    nouns: &[
        "registration",
        "welcome drinks",
        "keynote",
        "workshop",
        "lunch",
        "coffee break",
        "panel",
        "dinner",
        "check-in",
        "transfer",
        "rehearsal",
        "briefing",
        "breakout",
        "networking",
        "closing remarks",
        "tour",
    ],
    verbs: &[
        "confirm", "book", "email", "call", "print", "collect", "pay", "send", "review", "update", "check", "order",
    ],
    code: false,
};
