//! Network helpers shared by the test crates (`#[path]`-included).

/// A loopback port nothing listens on now (the OS picks it; a race with another process taking
/// it first is possible but harmless in these tests: the start-up would fail loudly).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
