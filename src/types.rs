//! Registers the module's data types, and says why when the server refuses one: the names are
//! RedisBloom's (`MBbloom--`, `MBbloomCF`, so RDB files move both ways), and a server that has
//! RedisBloom loaded already (Redis 8 builds with their bundled modules load it at start) holds
//! them. Without this the load fails with no word of why, and a server starting aborts.

use redis_module::Context;

use crate::structure::Structure;

/// Creates every structure's data types (OnLoad only), or says which name is taken and what
/// to do.
pub fn register(ctx: &Context, structures: &[&Structure]) -> Result<(), String> {
    for &(ty, name) in structures.iter().flat_map(|s| s.types) {
        if ty.create_data_type(ctx.ctx).is_err() {
            return Err(taken(name));
        }
    }
    Ok(())
}

/// What to do when RedisBloom (or a second copy of layerbloom) is loaded already.
const REMEDY: &str = "RedisBloom (module 'bf') or a second copy of layerbloom is loaded in \
    this server; Redis 8 builds with their bundled modules load RedisBloom at start. layerbloom \
    replaces RedisBloom (the same BF/CF commands; it reads RedisBloom's RDB data) and cannot run \
    beside it: remove RedisBloom's loadmodule line (on Redis 8, the bundled redisbloom.so) and \
    load layerbloom alone";

/// The refusal of a data type whose name another module holds.
fn taken(name: &str) -> String {
    format!(
        "not loading: the data type name {name} is already registered by another module. \
         {REMEDY}"
    )
}

/// The refusal when the module name `bf` is taken.
pub fn name_taken() -> String {
    format!("layerbloom: not loading: another module named 'bf' is already loaded. {REMEDY}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_the_type_the_cause_and_the_remedy() {
        let text = taken("MBbloom--");
        assert!(name_taken().contains("named 'bf'"));
        for part in [
            "MBbloom--",
            "RedisBloom",
            "remove",
            "loadmodule",
            "load layerbloom alone",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
    }
}
