//! What a command is: its name, arity, flags, keys and arguments ([`CommandSpec`],
//! [`ArgSpec`]), from which `COMMAND INFO` and `COMMAND DOCS` answer and `WATCH` finds a
//! command's keys. Plain data, below the command table (`dispatch`) and the transactions.

/// The type of a documented argument, as `COMMAND DOCS` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgKind {
    /// A key (a namespace, for urlseen).
    Key,
    /// A string.
    String,
    /// An integer.
    Integer,
    /// A double.
    Double,
    /// A glob-style pattern.
    Pattern,
    /// A keyword alone, such as `NONSCALING`.
    PureToken,
    /// One of the [`ArgSpec::arguments`] (`BF.INFO key [CAPACITY | SIZE | …]`).
    OneOf,
}

impl ArgKind {
    /// The `type` field of `COMMAND DOCS`.
    pub fn as_str(self) -> &'static str {
        match self {
            ArgKind::Key => "key",
            ArgKind::String => "string",
            ArgKind::Integer => "integer",
            ArgKind::Double => "double",
            ArgKind::Pattern => "pattern",
            ArgKind::PureToken => "pure-token",
            ArgKind::OneOf => "oneof",
        }
    }
}

/// The documentation of one argument, for `COMMAND DOCS` (and so redis-cli's hints).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArgSpec {
    /// The argument's name.
    pub name: &'static str,
    /// Its type.
    pub kind: ArgKind,
    /// The keyword that introduces it (`CAPACITY`), if any.
    pub token: Option<&'static str>,
    /// Whether it may be left out.
    pub optional: bool,
    /// Whether it may be repeated.
    pub multiple: bool,
    /// The alternatives of an [`ArgKind::OneOf`].
    pub arguments: &'static [ArgSpec],
}

impl ArgSpec {
    /// A required, single argument.
    pub const fn new(name: &'static str, kind: ArgKind) -> ArgSpec {
        ArgSpec { name, kind, token: None, optional: false, multiple: false, arguments: &[] }
    }

    /// An [`ArgKind::OneOf`] of `arguments`.
    pub const fn one_of(name: &'static str, arguments: &'static [ArgSpec]) -> ArgSpec {
        ArgSpec { arguments, ..ArgSpec::new(name, ArgKind::OneOf) }
    }

    /// Introduced by `token`.
    pub const fn token(mut self, token: &'static str) -> ArgSpec {
        self.token = Some(token);
        self
    }

    /// May be left out.
    pub const fn optional(mut self) -> ArgSpec {
        self.optional = true;
        self
    }

    /// May be repeated.
    pub const fn multiple(mut self) -> ArgSpec {
        self.multiple = true;
        self
    }
}

/// The static description of a command: what the dispatcher checks and `COMMAND` reports.
///
/// Built in a `const` with [`CommandSpec::new`] and the builder methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandSpec {
    /// The full name, lowercase as Redis spells it: `ping`, or `client|setname` for a
    /// subcommand (looked up by the part after `|`, case-insensitively).
    pub name: &'static str,
    /// Redis arity, the command name included: `n > 0` exactly n arguments, `n < 0` at least
    /// `-n`. A subcommand's arity counts the command and the subcommand.
    pub arity: i32,
    /// Redis command flags (`write`, `readonly`, `fast`, `denyoom`, …). `no_auth` lets the
    /// command run before authentication.
    pub flags: &'static [&'static str],
    /// Position of the first key argument (0: none), as `COMMAND` reports it.
    pub first_key: i32,
    /// Position of the last key argument (-1: the last argument).
    pub last_key: i32,
    /// Step between keys.
    pub key_step: i32,
    /// ACL categories, `@`-prefixed (`@connection`, `@fast`).
    pub acl_categories: &'static [&'static str],
    /// The `COMMAND DOCS` group (`connection`, `server`, …; `module` for a module's command).
    pub group: &'static str,
    /// The module a command comes from, as `COMMAND DOCS` names it (`bf` for RedisBloom's), and
    /// as `COMMAND LIST FILTERBY MODULE` selects it.
    pub module: Option<&'static str>,
    /// The `COMMAND DOCS` complexity, if documented.
    pub complexity: Option<&'static str>,
    /// One-line summary.
    pub summary: &'static str,
    /// The version that introduced the command.
    pub since: &'static str,
    /// The arguments after the name.
    pub args: &'static [ArgSpec],
}

impl CommandSpec {
    /// A command with no flags, no keys and no documentation.
    pub const fn new(name: &'static str, arity: i32) -> CommandSpec {
        CommandSpec {
            name,
            arity,
            flags: &[],
            first_key: 0,
            last_key: 0,
            key_step: 0,
            acl_categories: &[],
            group: "generic",
            module: None,
            complexity: None,
            summary: "",
            since: "0.1.0",
            args: &[],
        }
    }

    /// Sets the Redis command flags.
    pub const fn flags(mut self, flags: &'static [&'static str]) -> CommandSpec {
        self.flags = flags;
        self
    }

    /// Sets the key positions.
    pub const fn keys(mut self, first: i32, last: i32, step: i32) -> CommandSpec {
        self.first_key = first;
        self.last_key = last;
        self.key_step = step;
        self
    }

    /// Sets the ACL categories.
    pub const fn acl(mut self, categories: &'static [&'static str]) -> CommandSpec {
        self.acl_categories = categories;
        self
    }

    /// Sets the documentation group.
    pub const fn group(mut self, group: &'static str) -> CommandSpec {
        self.group = group;
        self
    }

    /// Marks a module's command: group `module`, and the module's name (as Redis documents a
    /// command a module registers).
    pub const fn module(mut self, module: &'static str) -> CommandSpec {
        self.group = "module";
        self.module = Some(module);
        self
    }

    /// Sets the documented complexity.
    pub const fn complexity(mut self, complexity: &'static str) -> CommandSpec {
        self.complexity = Some(complexity);
        self
    }

    /// Sets the summary.
    pub const fn summary(mut self, summary: &'static str) -> CommandSpec {
        self.summary = summary;
        self
    }

    /// Sets the version that introduced the command.
    pub const fn since(mut self, since: &'static str) -> CommandSpec {
        self.since = since;
        self
    }

    /// Sets the documented arguments.
    pub const fn args(mut self, args: &'static [ArgSpec]) -> CommandSpec {
        self.args = args;
        self
    }

    /// Whether `argc` arguments (name included) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = i64::try_from(argc).unwrap_or(i64::MAX);
        let arity = i64::from(self.arity);
        if arity >= 0 { argc == arity } else { argc >= -arity }
    }

    /// Whether the command carries `flag`.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.contains(&flag)
    }

    /// The name a subcommand is looked up by: the part after the last `|`.
    pub(crate) fn lookup_name(&self) -> &'static str {
        self.name.rsplit('|').next().unwrap_or(self.name)
    }
}
