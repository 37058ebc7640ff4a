// Bench-only service: the raw cost of moving `binary` through Thrift with the
// same transport as the LAN protocol (framed, binary protocol, geops sizing).
namespace cpp geops.bench.gen

service Echo {
  binary echo(1: binary data),
}
