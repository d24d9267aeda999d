-- lowlat.lua: a Wireshark dissector for lowlat's wire protocol.
--
-- Load it with `tshark -X lua_script:wireshark/lowlat.lua` (or `wireshark -X ...`), or copy it
-- into the personal Lua plugins folder (Help > About > Folders > Personal Lua Plugins). Files
-- written by `lowlat gen FILE.x --lang wireshark` load the same way, before or after this one,
-- and make the argument and result bodies of that interface's procedures readable.
--
-- What it reads (the authoritative layouts are in crates/proto/src/wire/*.rs and seal.rs):
--
--   * lowlat's frame: the 32-byte header, the 16-byte tag of a keyed session (flag TAGGED), the
--     8-byte sequence number of a sealed one (flag SEALED), then the body as the kind says: the
--     bind request with its cookie and proof, BindRetry's cookie, BindOk's grant, BindRefused's
--     refusal, an Error's message, a FragAck's bitmap, a path challenge in the header itself,
--     and the fragments of calls and results (reassembled; decoded by a generated dissector).
--   * UDP: one frame a datagram, then, when checksums are on (the default), a CRC32C of the
--     datagram before it (crates/transport/src/udp.rs); found by a heuristic on the magic "Ll".
--   * TCP: each frame after a 4-byte little-endian length (crates/transport/src/tcp/framing.rs),
--     reassembled across segments; found by a heuristic on the length and the magic.
--   * Ethernet, EtherType 0x88B5 (raw eth:// and AF_XDP xdp://): lowlat's 4-byte shim (kind,
--     flags, payload length), the payload (a frame, a discovery message or a ping) and, when
--     flagged, a CRC32C of shim and payload (crates/eth/src/frame.rs).
--
-- Message bodies are decoded with the tables a generated file puts in the global
-- `_G.lowlat_programs[program][version]`. Which program a session calls is learnt from its
-- BindRequest in the capture (and the server's byte order from the BindOk); for sessions whose
-- bind is not in the capture, the preferences "Program" and "Version" (Edit > Preferences >
-- Protocols > LOWLAT, or `-o lowlat.program:0x20004C4C`) name it, and when neither says, the
-- only interface loaded is assumed if exactly one is. Results are matched to their calls by
-- (token, slot, call number), which gives a result its procedure.
--
-- Expert information is added only for real problems: a frame that is not lowlat's where
-- lowlat's was expected, lengths that disagree, a failed Ethernet checksum, a body that does not
-- decode as its procedure's.

local VERSION = "1"

-- Bit operations: Lua 5.2's bit32, Wireshark's BitOp (whose results are signed; every use below
-- masks or reduces them), or Lua 5.3's own operators (compiled only where they exist).
local bitops = bit32 or bit or load([[return {
    band = function(a, b) return a & b end,
    bxor = function(a, b) return a ~ b end,
    rshift = function(a, n) return (a & 0xFFFFFFFF) >> n end,
}]])()
local band, bxor, rshift = bitops.band, bitops.bxor, bitops.rshift

-- Wire constants (crates/proto/src/wire).
local HEADER_LEN = 32
local TAG_LEN = 16
local SEQ_LEN = 8
local CRC_LEN = 4
local BIND_REQUEST_LEN = 32
local COOKIE_LEN = 20
local BIND_MAX_LEN = BIND_REQUEST_LEN + COOKIE_LEN + TAG_LEN
local GRANT_LEN = 16
local REFUSAL_LEN = 12
local MAX_ERROR_MESSAGE = 1024
local ETHERTYPE = 0x88B5

local FLAG_REQ_ACK, FLAG_RETRANSMIT, FLAG_STALLED, FLAG_TAGGED, FLAG_SEALED = 1, 2, 4, 8, 16
local BIND_RELIABLE, BIND_COOKIE, BIND_KEYED, BIND_SEALED, BIND_SEAL_AES = 1, 2, 4, 8, 16

local K_BIND, K_BIND_OK, K_BIND_REFUSED, K_CALL, K_RESULT = 1, 2, 3, 4, 5
local K_ACK, K_WORKING, K_ERROR, K_FRAG_ACK, K_PROBE = 6, 7, 8, 9, 10
local K_BIND_RETRY, K_PATH_CHALLENGE, K_PATH_RESPONSE = 11, 12, 13

local kinds = {
    [K_BIND] = "Bind", [K_BIND_OK] = "BindOk", [K_BIND_REFUSED] = "BindRefused",
    [K_CALL] = "Call", [K_RESULT] = "Result", [K_ACK] = "Ack", [K_WORKING] = "Working",
    [K_ERROR] = "Error", [K_FRAG_ACK] = "FragAck", [K_PROBE] = "Probe",
    [K_BIND_RETRY] = "BindRetry", [K_PATH_CHALLENGE] = "PathChallenge",
    [K_PATH_RESPONSE] = "PathResponse",
}
local error_codes = {
    [1] = "UnknownProcedure", [2] = "GarbageArgs", [3] = "ServerError", [4] = "UnknownSession",
    [5] = "TooLarge", [6] = "Busy",
}
local refusals = {
    [1] = "UnknownProgram", [2] = "VersionMismatch", [3] = "TooManySessions",
    [4] = "ProtocolMismatch", [5] = "Malformed", [6] = "KeyRequired", [7] = "KeyNotExpected",
    [8] = "BadKey", [9] = "SourceLimit", [10] = "EncryptionRequired",
    [11] = "EncryptionUnavailable",
}
local byte_orders = { [0] = "little-endian", [1] = "big-endian" }
local eth_kinds = { [1] = "DATA", [2] = "DISCOVER", [3] = "DISCOVER_REPLY", [4] = "PING" }

-- The protocols: the frame itself, its framing over TCP, and the Ethernet shim.
local lowlat = Proto("lowlat", "lowlat RPC")
local lowlat_tcp = Proto("lowlat.tcp", "lowlat framing over TCP")
local lowlat_eth = Proto("lowlat.eth", "lowlat Ethernet shim")

local F = {
    -- Header (crates/proto/src/wire/header.rs).
    magic = ProtoField.string("lowlat.magic", "Magic"),
    version = ProtoField.uint8("lowlat.version", "Protocol version"),
    kind = ProtoField.uint8("lowlat.kind", "Kind", base.DEC, kinds),
    flags = ProtoField.uint8("lowlat.flags", "Flags", base.HEX),
    flag_req_ack = ProtoField.bool("lowlat.flags.req_ack", "Acknowledgement requested", 8, nil, FLAG_REQ_ACK),
    flag_retransmit = ProtoField.bool("lowlat.flags.retransmit", "Retransmission", 8, nil, FLAG_RETRANSMIT),
    flag_stalled = ProtoField.bool("lowlat.flags.stalled", "Stalled", 8, nil, FLAG_STALLED),
    flag_tagged = ProtoField.bool("lowlat.flags.tagged", "Tagged (keyed session)", 8, nil, FLAG_TAGGED),
    flag_sealed = ProtoField.bool("lowlat.flags.sealed", "Sealed (encrypted body)", 8, nil, FLAG_SEALED),
    reserved = ProtoField.uint8("lowlat.reserved", "Reserved", base.HEX),
    slot = ProtoField.uint16("lowlat.slot", "Slot"),
    token = ProtoField.uint64("lowlat.token", "Session token", base.HEX),
    token_generation = ProtoField.uint16("lowlat.token.generation", "Server generation", base.DEC),
    token_session = ProtoField.uint16("lowlat.token.session", "Session index", base.DEC),
    token_random = ProtoField.uint32("lowlat.token.random", "Random bits", base.HEX),
    call_no = ProtoField.uint32("lowlat.call_no", "Call number"),
    nonce_low = ProtoField.uint32("lowlat.nonce_low", "Bind nonce (low 32 bits)", base.HEX),
    proc = ProtoField.uint32("lowlat.proc", "Procedure"),
    error_code = ProtoField.uint32("lowlat.error.code", "Error code", base.DEC, error_codes),
    total_len = ProtoField.uint32("lowlat.total_len", "Message length"),
    offset = ProtoField.uint32("lowlat.offset", "Fragment offset"),
    fragack_count = ProtoField.uint32("lowlat.fragack.count", "Fragments received (cumulative)"),
    server_generation = ProtoField.uint32("lowlat.error.server_generation", "Server generation"),
    path_epoch = ProtoField.uint32("lowlat.path.epoch", "Challenge epoch"),
    path_mac = ProtoField.bytes("lowlat.path.mac", "Challenge MAC"),
    -- After the header.
    tag = ProtoField.bytes("lowlat.tag", "Tag"),
    seq = ProtoField.uint64("lowlat.seq", "Sequence number"),
    ciphertext = ProtoField.bytes("lowlat.ciphertext", "Ciphertext"),
    body = ProtoField.bytes("lowlat.body", "Body"),
    body_len = ProtoField.uint32("lowlat.body_len", "Body length"),
    fragment = ProtoField.bool("lowlat.fragment", "Fragment"),
    reassembled = ProtoField.uint32("lowlat.reassembled_len", "Reassembled message length"),
    fragack_bitmap = ProtoField.uint64("lowlat.fragack.bitmap", "Next 64 fragments received", base.HEX),
    error_message = ProtoField.string("lowlat.error.message", "Error message", base.UNICODE),
    -- Bind request (crates/proto/src/wire/bind.rs).
    bind_program = ProtoField.uint32("lowlat.bind.program", "Program", base.HEX),
    bind_version = ProtoField.uint32("lowlat.bind.version", "Version"),
    bind_proto_min = ProtoField.uint8("lowlat.bind.proto_min", "Lowest protocol version"),
    bind_proto_max = ProtoField.uint8("lowlat.bind.proto_max", "Highest protocol version"),
    bind_byte_order = ProtoField.uint8("lowlat.bind.byte_order", "Client byte order", base.DEC, byte_orders),
    bind_flags = ProtoField.uint8("lowlat.bind.flags", "Bind flags", base.HEX),
    bind_reliable = ProtoField.bool("lowlat.bind.flags.reliable", "Reliable transport", 8, nil, BIND_RELIABLE),
    bind_cookie = ProtoField.bool("lowlat.bind.flags.cookie", "Cookie follows", 8, nil, BIND_COOKIE),
    bind_keyed = ProtoField.bool("lowlat.bind.flags.keyed", "Pre-shared key", 8, nil, BIND_KEYED),
    bind_sealed = ProtoField.bool("lowlat.bind.flags.sealed", "Encryption asked", 8, nil, BIND_SEALED),
    bind_seal_aes = ProtoField.bool("lowlat.bind.flags.seal_aes", "AES-256-GCM (else ChaCha20-Poly1305)", 8, nil, BIND_SEAL_AES),
    bind_max_message = ProtoField.uint32("lowlat.bind.max_message", "Largest message"),
    bind_max_frame = ProtoField.uint32("lowlat.bind.max_frame", "Largest frame"),
    bind_slots = ProtoField.uint16("lowlat.bind.slots", "Slots wanted"),
    bind_window = ProtoField.uint16("lowlat.bind.window", "Window wanted"),
    bind_nonce = ProtoField.uint64("lowlat.bind.nonce", "Nonce", base.HEX),
    bind_proof = ProtoField.bytes("lowlat.bind.proof", "Proof of the pre-shared key"),
    bind_padding = ProtoField.bytes("lowlat.bind.padding", "Padding (keyed binds: to the longest bind)"),
    cookie_epoch = ProtoField.uint32("lowlat.cookie.epoch", "Cookie epoch"),
    cookie_mac = ProtoField.bytes("lowlat.cookie.mac", "Cookie MAC"),
    -- Bind answers (crates/proto/src/wire/bind_answer.rs).
    grant_slots = ProtoField.uint16("lowlat.grant.slots", "Slots granted"),
    grant_window = ProtoField.uint16("lowlat.grant.window", "Window granted"),
    grant_byte_order = ProtoField.uint8("lowlat.grant.byte_order", "Server byte order (bodies)", base.DEC, byte_orders),
    grant_flags = ProtoField.uint8("lowlat.grant.flags", "Grant flags", base.HEX),
    grant_sealed = ProtoField.bool("lowlat.grant.flags.sealed", "Sealed session", 8, nil, BIND_SEALED),
    grant_generation = ProtoField.uint16("lowlat.grant.generation", "Server generation"),
    grant_max_message = ProtoField.uint32("lowlat.grant.max_message", "Largest message"),
    grant_max_frame = ProtoField.uint32("lowlat.grant.max_frame", "Largest frame"),
    refusal_code = ProtoField.uint32("lowlat.refusal.code", "Refusal", base.DEC, refusals),
    refusal_first = ProtoField.uint32("lowlat.refusal.arg1", "First argument"),
    refusal_second = ProtoField.uint32("lowlat.refusal.arg2", "Second argument"),
    -- What the capture says of the call (generated).
    program = ProtoField.uint32("lowlat.program", "Program", base.HEX),
    program_version = ProtoField.uint32("lowlat.program_version", "Program version"),
    proc_name = ProtoField.string("lowlat.proc_name", "Procedure name"),
    call_proc = ProtoField.uint32("lowlat.call.proc", "Procedure of the call answered"),
    request_in = ProtoField.framenum("lowlat.request_in", "Call in frame"),
    response_in = ProtoField.framenum("lowlat.response_in", "Answer in frame"),
    -- Transport trailers.
    crc = ProtoField.uint32("lowlat.crc32c", "CRC32C", base.HEX),
}
lowlat.fields = F

local FT = {
    length = ProtoField.uint32("lowlat.tcp.length", "Frame length"),
}
lowlat_tcp.fields = FT

local FE = {
    kind = ProtoField.uint8("lowlat.eth.kind", "Kind", base.DEC, eth_kinds),
    flags = ProtoField.uint8("lowlat.eth.flags", "Flags", base.HEX),
    flag_crc = ProtoField.bool("lowlat.eth.flags.crc", "CRC32C follows", 8, nil, 1),
    length = ProtoField.uint16("lowlat.eth.length", "Payload length"),
    crc = ProtoField.uint32("lowlat.eth.crc32c", "CRC32C", base.HEX),
    discovery = ProtoField.string("lowlat.eth.discovery", "Discovery message"),
    nonce = ProtoField.uint64("lowlat.eth.nonce", "Discovery nonce", base.HEX),
    payload = ProtoField.bytes("lowlat.eth.payload", "Payload"),
}
lowlat_eth.fields = FE

local E = {
    bad_magic = ProtoExpert.new("lowlat.bad_magic", "Not a lowlat frame (bad magic)",
        expert.group.MALFORMED, expert.severity.ERROR),
    short = ProtoExpert.new("lowlat.short", "Frame shorter than its header, tag or payload",
        expert.group.MALFORMED, expert.severity.ERROR),
    length = ProtoExpert.new("lowlat.length_mismatch", "Lengths disagree",
        expert.group.MALFORMED, expert.severity.ERROR),
    bad_message = ProtoExpert.new("lowlat.error.bad_message", "Error message too long or not UTF-8",
        expert.group.MALFORMED, expert.severity.ERROR),
    -- A well-formed frame whose body is not its procedure's arguments or result: a violation of
    -- the interface, not of lowlat's framing (the server answers it GarbageArgs).
    bad_body = ProtoExpert.new("lowlat.bad_body", "Body does not decode as its procedure's",
        expert.group.PROTOCOL, expert.severity.ERROR),
    eth_crc = ProtoExpert.new("lowlat.eth.bad_crc", "CRC32C does not match",
        expert.group.CHECKSUM, expert.severity.ERROR),
}
lowlat.experts = { E.bad_magic, E.short, E.length, E.bad_message, E.bad_body }
lowlat_eth.experts = { E.eth_crc }

lowlat.prefs.program = Pref.string("Program", "",
    "Program number (0x20004C4C or decimal) of sessions whose bind is not in the capture (empty: learn from the bind)")
lowlat.prefs.version = Pref.uint("Version", 0,
    "Version of sessions whose bind is not in the capture (0: learn from the bind)")
lowlat.prefs.big_endian = Pref.bool("Big-endian bodies", false,
    "Byte order of the bodies of sessions whose BindOk is not in the capture")

-- Interfaces registered by generated files: lowlat_programs[program][version] = {procs = ...}.
-- Wireshark gives each script its own environment, so the table shared with them is _G's.
local lowlat_programs = _G.lowlat_programs or {}
_G.lowlat_programs = lowlat_programs

------------------------------------------------------------------------------------------------
-- CRC32C (Castagnoli, reflected), as the crc32c crate computes it.

local crc_table = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then
            c = bxor(rshift(c, 1), 0x82F63B78)
        else
            c = rshift(c, 1)
        end
    end
    crc_table[i] = c
end

local function crc32c(tvb, offset, len)
    local bytes = tvb:bytes(offset, len)
    local c = 0xFFFFFFFF
    for i = 0, len - 1 do
        c = bxor(rshift(c, 8), crc_table[band(bxor(c, bytes:get_index(i)), 0xFF)])
    end
    return bxor(c, 0xFFFFFFFF) % 4294967296
end

------------------------------------------------------------------------------------------------
-- What the capture has taught so far: reset for every capture file.

local state = {}
local function reset()
    state = {
        binds = {},       -- bind nonce (low bits) -> {program, version}
        sessions = {},    -- token -> {program, version, big_endian, sealed}
        calls = {},       -- token:slot:call -> {proc, frame, answer}
        partial = {},     -- token:slot:call:kind -> {total, parts = {offset = bytes}, have}
        whole = {},       -- frame number -> ByteArray of the message it completed
    }
end
reset()
lowlat.init = reset

local function key_of(token, slot, call_no)
    return tostring(token) .. ":" .. slot .. ":" .. call_no
end

-- The interface (generated tables) of a session, and its body byte order.
local function interface_of(token)
    local s = state.sessions[tostring(token)]
    local program, version, big = nil, nil, lowlat.prefs.big_endian
    if s then
        program, version, big = s.program, s.version, s.big_endian
    end
    local preferred = tonumber(lowlat.prefs.program)
    if preferred then
        program = program or preferred
        version = version or lowlat.prefs.version
    end
    if program == nil then
        -- The only interface loaded, if exactly one is.
        local only
        for p, versions in pairs(lowlat_programs) do
            for v, _ in pairs(versions) do
                if only then return nil end
                only = { p, v }
            end
        end
        if not only then return nil end
        program, version = only[1], only[2]
    end
    local versions = lowlat_programs[program]
    local iface = versions and versions[version]
    return iface, program, version, big
end

------------------------------------------------------------------------------------------------
-- Bodies in lowlat's native encoding (crates/codec/src/lib.rs): scalars at their natural width
-- in the server's byte order, bool and presence flags one byte, variable-length data after a
-- u32 count, no padding; a procedure's only argument (or its result), when it is a
-- variable-length opaque or string, is the whole body without a count. The type tables are
-- the generated files' (see crates/idl/src/wireshark.rs).

local SCALAR = { int = 4, uint = 4, hyper = 8, uhyper = 8, float = 4, double = 8, bool = 1, enum = 4 }
local MAX_DEPTH = 64

local function need(ctx, n, tree, what)
    if ctx.off + n > ctx.tvb:len() then
        ctx.bad = string.format("%s: %d bytes needed at offset %d (%d left)", what, n, ctx.off,
            ctx.tvb:len() - ctx.off)
        return false
    end
    return true
end

local function read_u32(ctx)
    local r = ctx.tvb(ctx.off, 4)
    return ctx.le and r:le_uint() or r:uint()
end

local function add_scalar(ctx, tree, field, n)
    local r = ctx.tvb(ctx.off, n)
    local item
    if ctx.le then item = tree:add_le(field, r) else item = tree:add(field, r) end
    ctx.off = ctx.off + n
    return item
end

-- A scalar's value as text, for the Info column.
local function scalar_text(ctx, k, n)
    local r = ctx.tvb(ctx.off, n)
    local v
    if k == "uint" or k == "bool" then
        v = ctx.le and r:le_uint() or r:uint()
    elseif k == "int" or k == "enum" then
        v = ctx.le and r:le_int() or r:int()
    elseif k == "hyper" then
        v = ctx.le and r:le_int64() or r:int64()
    elseif k == "uhyper" then
        v = ctx.le and r:le_uint64() or r:uint64()
    else
        v = ctx.le and r:le_float() or r:float()
    end
    return tostring(v)
end

local decode

-- A value whose position is `field` (named `label`), of type `ty`.
decode = function(ctx, tree, ty, field, label, depth, whole)
    if depth > MAX_DEPTH then
        ctx.bad = "nested more deeply than " .. MAX_DEPTH
        return false
    end
    local k = ty.k
    local n = SCALAR[k]
    if n then
        if not need(ctx, n, tree, label) then return false end
        if depth == 0 then
            ctx.summary[#ctx.summary + 1] = label .. "=" .. scalar_text(ctx, k, n)
        end
        add_scalar(ctx, tree, field, n)
        return true
    elseif k == "opaque" then
        if not need(ctx, ty.n, tree, label) then return false end
        tree:add(field, ctx.tvb(ctx.off, ty.n))
        ctx.off = ctx.off + ty.n
        return true
    elseif k == "varopaque" or k == "string" then
        local len
        if whole then
            len = ctx.tvb:len() - ctx.off
        else
            if not need(ctx, 4, tree, label) then return false end
            len = read_u32(ctx)
            ctx.off = ctx.off + 4
        end
        if ty.max and len > ty.max then
            ctx.bad = string.format("%s: %d bytes (more than its bound %d)", label, len, ty.max)
            return false
        end
        if not need(ctx, len, tree, label) then return false end
        local r = ctx.tvb(ctx.off, len)
        local item
        if k == "string" then
            item = tree:add_packet_field(field, r, ENC_UTF_8)
        else
            item = tree:add(field, r)
        end
        item:append_text(string.format(" (%d bytes)", len))
        ctx.off = ctx.off + len
        return true
    elseif k == "array" or k == "vararray" then
        local start = ctx.off
        local count = ty.n
        if k == "vararray" then
            if not need(ctx, 4, tree, label) then return false end
            count = read_u32(ctx)
            ctx.off = ctx.off + 4
            if ty.max and count > ty.max then
                ctx.bad = string.format("%s: %d elements (more than its bound %d)", label, count, ty.max)
                return false
            end
        end
        local sub = tree:add(ctx.tvb(start, 0), string.format("%s: %d elements", label, count))
        for i = 1, count do
            if not decode(ctx, sub, ty.of, field, string.format("%s[%d]", label, i - 1), depth + 1) then
                return false
            end
        end
        sub:set_len(ctx.off - start)
        return true
    elseif k == "optional" then
        if not need(ctx, 1, tree, label) then return false end
        local present = ctx.tvb(ctx.off, 1):uint()
        ctx.off = ctx.off + 1
        if present == 0 then
            tree:add(ctx.tvb(ctx.off - 1, 1), label .. ": (absent)")
            return true
        end
        return decode(ctx, tree, ty.of, field, label, depth + 1)
    elseif k == "struct" then
        local start = ctx.off
        local sub = tree:add(field, ctx.tvb(start, 0))
        sub:append_text(" (" .. ty.name .. ")")
        for _, m in ipairs(ty.fields) do
            if not decode(ctx, sub, m.ty, m.field, m.name, depth + 1) then return false end
        end
        sub:set_len(ctx.off - start)
        return true
    elseif k == "union" then
        local start = ctx.off
        local sub = tree:add(field, ctx.tvb(start, 0))
        sub:append_text(" (" .. ty.name .. ")")
        local d = ty.disc
        local dn = SCALAR[d.ty.k]
        if not need(ctx, dn, sub, d.name) then return false end
        local r = ctx.tvb(ctx.off, dn)
        local value
        if dn == 1 then
            value = r:uint()
        elseif d.ty.k == "uint" then
            value = ctx.le and r:le_uint() or r:uint()
        else
            value = ctx.le and r:le_int() or r:int()
        end
        add_scalar(ctx, sub, d.field, dn)
        local arm = ty.arms[value]
        if arm == nil then arm = ty.default end
        if arm == nil then
            ctx.bad = string.format("%s: no arm for discriminant %d", ty.name, value)
            return false
        end
        if arm then
            if not decode(ctx, sub, arm.ty, arm.field, arm.name, depth + 1) then return false end
        end
        sub:set_len(ctx.off - start)
        return true
    end
    ctx.bad = "unknown type " .. tostring(k)
    return false
end

-- Decodes a whole message body (arguments or result) of `proc` into `tree`.
local function decode_body(tvb, tree, iface, proc, side, big)
    local values = proc[side]
    if values == nil or #values == 0 then
        if tvb:len() > 0 then
            return string.format("%d bytes where %s has no %s", tvb:len(), proc.name,
                side == "args" and "arguments" or "result")
        end
        return nil
    end
    local ctx = { tvb = tvb, off = 0, le = not big, summary = {} }
    local sub = tree:add(iface.proto, tvb(0, tvb:len()))
    sub:append_text(string.format(": %s %s", proc.name, side == "args" and "arguments" or "result"))
    local whole = proc[side .. "_body"]
    for _, v in ipairs(values) do
        if not decode(ctx, sub, v.ty, v.field, v.name, 0, whole) then
            return ctx.bad
        end
    end
    if ctx.off ~= tvb:len() then
        return string.format("%d bytes left over after %s's %s", tvb:len() - ctx.off, proc.name, side)
    end
    return nil, table.concat(ctx.summary, ", ")
end

------------------------------------------------------------------------------------------------
-- The frame.

local function add_flags(tree, tvb, off, field, bits)
    local item = tree:add(field, tvb(off, 1))
    for _, b in ipairs(bits) do item:add(b, tvb(off, 1)) end
    return item
end

local function flag_names(flags)
    local names = {}
    if band(flags, FLAG_REQ_ACK) ~= 0 then names[#names + 1] = "REQ_ACK" end
    if band(flags, FLAG_RETRANSMIT) ~= 0 then names[#names + 1] = "RETRANSMIT" end
    if band(flags, FLAG_STALLED) ~= 0 then names[#names + 1] = "STALLED" end
    if band(flags, FLAG_TAGGED) ~= 0 then names[#names + 1] = "TAGGED" end
    if band(flags, FLAG_SEALED) ~= 0 then names[#names + 1] = "SEALED" end
    return table.concat(names, ",")
end

local function add_bind(tree, b)
    local t = tree:add(b(0, math.min(b:len(), BIND_REQUEST_LEN)), "Bind request")
    t:add_le(F.bind_program, b(0, 4))
    t:add_le(F.bind_version, b(4, 4))
    t:add(F.bind_proto_min, b(8, 1))
    t:add(F.bind_proto_max, b(9, 1))
    t:add(F.bind_byte_order, b(10, 1))
    local bflags = b(11, 1):uint()
    add_flags(t, b, 11, F.bind_flags,
        { F.bind_reliable, F.bind_cookie, F.bind_keyed, F.bind_sealed, F.bind_seal_aes })
    t:add_le(F.bind_max_message, b(12, 4))
    t:add_le(F.bind_max_frame, b(16, 4))
    t:add_le(F.bind_slots, b(20, 2))
    t:add_le(F.bind_window, b(22, 2))
    t:add_le(F.bind_nonce, b(24, 8))
    local need_len = BIND_REQUEST_LEN
    if band(bflags, BIND_COOKIE) ~= 0 then
        need_len = need_len + COOKIE_LEN
        if band(bflags, BIND_KEYED) ~= 0 then need_len = need_len + TAG_LEN end
    end
    if b:len() < need_len then
        tree:add_proto_expert_info(E.short, string.format("bind body of %d bytes where its flags need %d",
            b:len(), need_len))
        return
    end
    if band(bflags, BIND_COOKIE) ~= 0 then
        local c = tree:add(b(BIND_REQUEST_LEN, COOKIE_LEN), "Cookie")
        c:add_le(F.cookie_epoch, b(BIND_REQUEST_LEN, 4))
        c:add(F.cookie_mac, b(BIND_REQUEST_LEN + 4, TAG_LEN))
        if band(bflags, BIND_KEYED) ~= 0 then
            tree:add(F.bind_proof, b(BIND_REQUEST_LEN + COOKIE_LEN, TAG_LEN))
        end
    end
    if b:len() > need_len then
        -- A keyed client pads every bind to the longest (request, cookie, proof) with zeros,
        -- so that the server's tagged cookie round is no larger than the bind it answers.
        if band(bflags, BIND_KEYED) ~= 0 and b:len() == BIND_MAX_LEN then
            tree:add(F.bind_padding, b(need_len, b:len() - need_len))
        else
            tree:add_proto_expert_info(E.length, string.format("%d bytes after the bind body",
                b:len() - need_len))
        end
    end
    local program, version = b(0, 4):le_uint(), b(4, 4):le_uint()
    return program, version, bflags
end

local function add_grant(tree, b)
    local t = tree:add(b(0, GRANT_LEN), "Bind grant")
    t:add_le(F.grant_slots, b(0, 2))
    t:add_le(F.grant_window, b(2, 2))
    t:add(F.grant_byte_order, b(4, 1))
    add_flags(t, b, 5, F.grant_flags, { F.grant_sealed })
    t:add_le(F.grant_generation, b(6, 2))
    t:add_le(F.grant_max_message, b(8, 4))
    t:add_le(F.grant_max_frame, b(12, 4))
    return b(4, 1):uint() == 1, band(b(5, 1):uint(), BIND_SEALED) ~= 0
end

local refusal_args = {
    [1] = { "program", nil }, [2] = { "lowest version served", "highest version served" },
    [4] = { "lowest protocol version", "highest protocol version" },
}

local function add_refusal(tree, b)
    local t = tree:add(b(0, REFUSAL_LEN), "Bind refusal")
    local code = b(0, 4):le_uint()
    t:add_le(F.refusal_code, b(0, 4))
    local names = refusal_args[code] or {}
    local a = t:add_le(F.refusal_first, b(4, 4))
    if names[1] then a:append_text(" (" .. names[1] .. ")") end
    local c = t:add_le(F.refusal_second, b(8, 4))
    if names[2] then c:append_text(" (" .. names[2] .. ")") end
    return refusals[code] or string.format("Unknown(%d)", code)
end

local function valid_utf8(s)
    local i, n = 1, #s
    while i <= n do
        local c = s:byte(i)
        local extra
        if c < 0x80 then
            extra = 0
        elseif c >= 0xC2 and c <= 0xDF then
            extra = 1
        elseif c >= 0xE0 and c <= 0xEF then
            extra = 2
        elseif c >= 0xF0 and c <= 0xF4 then
            extra = 3
        else
            return false
        end
        for j = 1, extra do
            local d = s:byte(i + j)
            if not d or d < 0x80 or d > 0xBF then return false end
        end
        i = i + extra + 1
    end
    return true
end

-- Fixed body sizes of the binding frames, checked against what the frame carries.
local fixed_body = { [K_BIND_OK] = GRANT_LEN, [K_BIND_REFUSED] = REFUSAL_LEN, [K_BIND_RETRY] = COOKIE_LEN,
    [K_FRAG_ACK] = 8 }

-- Dissects one lowlat frame (exactly its bytes: no framing, no trailer). Returns a short
-- summary for the Info column.
local function dissect_frame(tvb, pinfo, tree)
    pinfo.cols.protocol = "LOWLAT"
    local len = tvb:len()
    local root = tree:add(lowlat, tvb(0, len))
    if len < HEADER_LEN or tvb(0, 2):string() ~= "Ll" then
        if len >= 2 and tvb(0, 2):string() ~= "Ll" then
            root:add_proto_expert_info(E.bad_magic)
        else
            root:add_proto_expert_info(E.short, string.format("%d bytes: shorter than the %d-byte header",
                len, HEADER_LEN))
        end
        return "not lowlat", root
    end
    local kind = tvb(3, 1):uint()
    local flags = tvb(4, 1):uint()
    local slot = tvb(6, 2):le_uint()
    local token = tvb(8, 8):le_uint64()
    local call_no = tvb(16, 4):le_uint()
    local procv = tvb(20, 4):le_uint()
    local total = tvb(24, 4):le_uint()
    local offset = tvb(28, 4):le_uint()
    local kname = kinds[kind] or string.format("Unknown(%d)", kind)
    local binding = kind == K_BIND or kind == K_BIND_OK or kind == K_BIND_REFUSED or kind == K_BIND_RETRY
    local path = kind == K_PATH_CHALLENGE or kind == K_PATH_RESPONSE

    local h = root:add(tvb(0, HEADER_LEN), "Header")
    h:add(F.magic, tvb(0, 2))
    h:add(F.version, tvb(2, 1))
    h:add(F.kind, tvb(3, 1))
    add_flags(h, tvb, 4, F.flags, { F.flag_req_ack, F.flag_retransmit, F.flag_stalled, F.flag_tagged, F.flag_sealed })
    h:add(F.reserved, tvb(5, 1))
    h:add_le(F.slot, tvb(6, 2))
    local tk = h:add_le(F.token, tvb(8, 8))
    tk:add_le(F.token_generation, tvb(14, 2))
    tk:add_le(F.token_session, tvb(12, 2))
    tk:add_le(F.token_random, tvb(8, 4))
    if binding then
        h:add_le(F.nonce_low, tvb(16, 4))
    elseif path then
        h:add_le(F.path_epoch, tvb(16, 4))
    else
        h:add_le(F.call_no, tvb(16, 4))
    end
    if kind == K_ERROR then
        h:add_le(F.error_code, tvb(20, 4))
    elseif path then
        h:add(F.path_mac, tvb(20, 12))
    else
        h:add_le(F.proc, tvb(20, 4))
    end
    if not path then
        h:add_le(F.total_len, tvb(24, 4))
        if kind == K_FRAG_ACK then
            h:add_le(F.fragack_count, tvb(28, 4))
        elseif kind == K_ERROR and procv == 4 then
            h:add_le(F.server_generation, tvb(28, 4))
        else
            h:add_le(F.offset, tvb(28, 4))
        end
    end

    -- Tag and sequence number (keyed and sealed sessions).
    local at = HEADER_LEN
    local tagged = band(flags, FLAG_TAGGED) ~= 0
    local sealed = tagged and band(flags, FLAG_SEALED) ~= 0
    if tagged then
        local want = TAG_LEN + (sealed and SEQ_LEN or 0)
        if len < at + want then
            root:add_proto_expert_info(E.short, string.format("%d bytes after the header where the tag needs %d",
                len - at, want))
            return kname, root
        end
        root:add(F.tag, tvb(at, TAG_LEN))
        at = at + TAG_LEN
        if sealed then
            root:add_le(F.seq, tvb(at, SEQ_LEN))
            at = at + SEQ_LEN
        end
    end
    local blen = len - at
    local body = blen > 0 and tvb(at, blen):tvb() or nil
    root:add(F.body_len, blen):set_generated()

    local info = kname
    local tok = tostring(token)
    if kind == K_CALL or kind == K_RESULT or kind == K_ERROR or kind == K_WORKING or kind == K_ACK
        or kind == K_PROBE or kind == K_FRAG_ACK then
        info = string.format("%s slot=%d call=%d", kname, slot, call_no)
    end

    if kind == K_ERROR then
        info = string.format("%s %s", info, error_codes[procv] or string.format("Unknown(%d)", procv))
    end
    if sealed and blen > 0 then
        root:add(F.ciphertext, tvb(at, blen))
        info = info .. " (sealed)"
    end

    local fixed = fixed_body[kind]
    if fixed and not sealed and blen ~= fixed then
        root:add_proto_expert_info(blen < fixed and E.short or E.length,
            string.format("%s body of %d bytes (expected %d)", kname, blen, fixed))
        if blen < fixed then return info, root end
    end

    if sealed then
        -- A sealed body (never a binding frame's) is not read.
    elseif kind == K_BIND then
        if blen < BIND_REQUEST_LEN then
            root:add_proto_expert_info(E.short, string.format("bind body of %d bytes (shorter than %d)",
                blen, BIND_REQUEST_LEN))
            return info, root
        end
        local program, version, bflags = add_bind(root, body)
        if program then
            state.binds[call_no] = { program = program, version = version }
            info = string.format("Bind program=0x%08X version=%d%s%s%s", program, version,
                band(bflags, BIND_COOKIE) ~= 0 and " cookie" or "",
                band(bflags, BIND_KEYED) ~= 0 and " keyed" or "",
                band(bflags, BIND_SEALED) ~= 0 and " sealed" or "")
        end
    elseif kind == K_BIND_RETRY then
        local c = root:add(body(0, COOKIE_LEN), "Cookie")
        c:add_le(F.cookie_epoch, body(0, 4))
        c:add(F.cookie_mac, body(4, TAG_LEN))
    elseif kind == K_BIND_OK then
        local big, grant_sealed = add_grant(root, body)
        local b = state.binds[call_no]
        if b and not pinfo.visited then
            state.sessions[tok] = { program = b.program, version = b.version, big_endian = big,
                sealed = grant_sealed }
        end
        info = string.format("BindOk session=%d token=0x%s%s", tvb(12, 2):le_uint(), token:tohex(),
            grant_sealed and " sealed" or "")
    elseif kind == K_BIND_REFUSED then
        info = "BindRefused " .. add_refusal(root, body)
    elseif kind == K_FRAG_ACK then
        root:add_le(F.fragack_bitmap, body(0, 8))
    elseif kind == K_ERROR then
        if blen > 0 then
            local item = root:add_packet_field(F.error_message, body(0, blen), ENC_UTF_8)
            local s = body(0, blen):raw()
            if blen > MAX_ERROR_MESSAGE or not valid_utf8(s) then
                item:add_proto_expert_info(E.bad_message)
            end
            info = string.format("%s \"%s\"", info, s)
        end
    elseif path then
        info = string.format("%s slot=%d epoch=%d", kname, slot, call_no)
    end

    -- Calls and results: fragments, procedure, match, body.
    if kind == K_CALL or kind == K_RESULT or kind == K_ERROR or kind == K_WORKING then
        local key = key_of(token, slot, call_no)
        local call = state.calls[key]
        if kind == K_CALL then
            if not call then
                call = { proc = procv, frame = pinfo.number }
                state.calls[key] = call
            end
        elseif call and not pinfo.visited and kind ~= K_WORKING then
            call.answer = call.answer or pinfo.number
        end
        local iface, program, version, big = interface_of(token)
        if program then
            root:add(F.program, program):set_generated()
            root:add(F.program_version, version):set_generated()
        end
        local procno = kind == K_CALL and procv or (call and call.proc)
        local proc = iface and procno and iface.procs[procno]
        if kind ~= K_CALL and call then
            root:add(F.request_in, call.frame):set_generated()
            if procno then root:add(F.call_proc, procno):set_generated() end
        elseif kind == K_CALL and call and call.answer then
            root:add(F.response_in, call.answer):set_generated()
        end
        if proc then
            root:add(F.proc_name, proc.name):set_generated()
            info = string.format("%s %s", info, proc.name)
        elseif kind == K_CALL then
            info = string.format("%s proc=%d", info, procv)
        end
        if (kind == K_CALL or kind == K_RESULT) and not sealed then
            if offset + blen > total then
                root:add_proto_expert_info(E.length, string.format(
                    "fragment at %d of %d bytes ends past the message's %d", offset, blen, total))
                return info, root
            end
            local message
            if offset == 0 and blen == total then
                message = body
            else
                root:add(F.fragment, true):set_generated()
                info = string.format("%s [fragment %d..%d of %d]", info, offset, offset + blen, total)
                local pkey = key .. ":" .. kind
                if not pinfo.visited then
                    local p = state.partial[pkey]
                    if not p or p.total ~= total then
                        p = { total = total, parts = {}, have = 0 }
                        state.partial[pkey] = p
                    end
                    if not p.parts[offset] then
                        p.parts[offset] = tvb:bytes(at, blen)
                        p.have = p.have + blen
                    end
                    if p.have >= total then
                        local whole = ByteArray.new()
                        local o = 0
                        while o < total do
                            local part = p.parts[o]
                            if not part or part:len() == 0 then break end
                            whole:append(part)
                            o = o + part:len()
                        end
                        if o == total then
                            state.whole[pinfo.number] = whole
                        end
                        state.partial[pkey] = nil
                    end
                end
                local whole = state.whole[pinfo.number]
                if whole then
                    message = whole:tvb("Reassembled lowlat message")
                    root:add(F.reassembled, total):set_generated()
                end
            end
            if message and proc and message:len() == total then
                local bad, summary = decode_body(message, root, iface, proc, kind == K_CALL and "args" or "result", big)
                if bad then
                    root:add_proto_expert_info(E.bad_body, string.format("Body does not decode as %s's %s: %s",
                        proc.name, kind == K_CALL and "arguments" or "result", bad))
                elseif summary and summary ~= "" then
                    info = string.format("%s(%s)", info, summary)
                end
            elseif blen > 0 then
                root:add(F.body, tvb(at, blen))
            end
        end
    elseif blen > 0 and not sealed and kind ~= K_BIND and kind ~= K_BIND_OK and kind ~= K_BIND_REFUSED
        and kind ~= K_BIND_RETRY and kind ~= K_ERROR and kind ~= K_FRAG_ACK then
        root:add(F.body, tvb(at, blen))
    end
    return info, root
end

local function set_info(pinfo, info)
    local cur = tostring(pinfo.cols.info)
    if cur:find("^lowlat: ") then
        pinfo.cols.info:append(" | " .. info)
    else
        pinfo.cols.info:set("lowlat: " .. info)
    end
end

------------------------------------------------------------------------------------------------
-- UDP: one frame a datagram, maybe followed by a CRC32C of it.

local function looks_like_frame(tvb, at)
    if tvb:len() < at + HEADER_LEN then return false end
    if tvb(at, 2):string() ~= "Ll" then return false end
    local version, kind, reserved = tvb(at + 2, 1):uint(), tvb(at + 3, 1):uint(), tvb(at + 5, 1):uint()
    return version >= 1 and version <= 15 and kinds[kind] ~= nil and reserved == 0
end

local function dissect_datagram(tvb, pinfo, tree)
    local len = tvb:len()
    local frame_len = len
    local has_crc = len >= HEADER_LEN + CRC_LEN and crc32c(tvb, 0, len - CRC_LEN) == tvb(len - CRC_LEN, 4):le_uint()
    if has_crc then frame_len = len - CRC_LEN end
    local info, root = dissect_frame(tvb(0, frame_len):tvb(), pinfo, tree)
    if has_crc then
        local item = root:add_le(F.crc, tvb(frame_len, CRC_LEN))
        item:append_text(" [correct]")
    end
    set_info(pinfo, info)
    return len
end

function lowlat.dissector(tvb, pinfo, tree)
    return dissect_datagram(tvb, pinfo, tree)
end

local function heur_udp(tvb, pinfo, tree)
    if not looks_like_frame(tvb, 0) then return false end
    dissect_datagram(tvb, pinfo, tree)
    return true
end

------------------------------------------------------------------------------------------------
-- TCP: frames after a 4-byte little-endian length.

-- The longest first frame the heuristic believes (a connection's first frame is a bind, of
-- under 100 bytes; later ones follow the conversation): 64 MiB, which an ONC RPC record mark
-- read as a little-endian length almost never is.
local MAX_TCP_FRAME = 64 * 1024 * 1024

local function tcp_pdu_len(tvb, pinfo, offset)
    return 4 + tvb(offset, 4):le_uint()
end

local function tcp_pdu(tvb, pinfo, tree)
    local n = tvb(0, 4):le_uint()
    local t = tree:add(lowlat_tcp, tvb(0, tvb:len()))
    t:add_le(FT.length, tvb(0, 4))
    if tvb:len() - 4 ~= n then
        t:add_proto_expert_info(E.length, string.format("length %d but %d bytes follow", n, tvb:len() - 4))
    end
    if tvb:len() <= 4 then
        t:add_proto_expert_info(E.short, "an empty frame")
        return tvb:len()
    end
    local info = dissect_frame(tvb(4, tvb:len() - 4):tvb(), pinfo, tree)
    set_info(pinfo, info)
    return tvb:len()
end

function lowlat_tcp.dissector(tvb, pinfo, tree)
    dissect_tcp_pdus(tvb, tree, 4, tcp_pdu_len, tcp_pdu, true)
    return tvb:len()
end

local function heur_tcp(tvb, pinfo, tree)
    if tvb:len() < 4 + HEADER_LEN then return false end
    local n = tvb(0, 4):le_uint()
    if n < HEADER_LEN or n > MAX_TCP_FRAME or not looks_like_frame(tvb, 4) then return false end
    pinfo.conversation = lowlat_tcp
    lowlat_tcp.dissector(tvb, pinfo, tree)
    return true
end

------------------------------------------------------------------------------------------------
-- Ethernet (EtherType 0x88B5): kind, flags, payload length, payload, CRC32C.

local DISCOVERY_LEN = 12

function lowlat_eth.dissector(tvb, pinfo, tree)
    local len = tvb:len()
    local t = tree:add(lowlat_eth, tvb(0, math.min(len, 4)))
    pinfo.cols.protocol = "LOWLAT"
    if len < 4 then
        t:add_proto_expert_info(E.short, string.format("%d bytes: shorter than the 4-byte shim", len))
        return len
    end
    local kind, flags, plen = tvb(0, 1):uint(), tvb(1, 1):uint(), tvb(2, 2):le_uint()
    t:add(FE.kind, tvb(0, 1))
    add_flags(t, tvb, 1, FE.flags, { FE.flag_crc })
    t:add_le(FE.length, tvb(2, 2))
    local has_crc = band(flags, 1) ~= 0
    local need_len = 4 + plen + (has_crc and CRC_LEN or 0)
    if len < need_len then
        t:add_proto_expert_info(E.short, string.format("payload length %d but %d bytes follow the shim", plen, len - 4))
        return len
    end
    local info = eth_kinds[kind] or string.format("kind %d", kind)
    if kind == 1 and plen >= HEADER_LEN and looks_like_frame(tvb(4, plen):tvb(), 0) then
        info = dissect_frame(tvb(4, plen):tvb(), pinfo, tree)
    elseif (kind == 2 or kind == 3) and plen == DISCOVERY_LEN then
        t:add(FE.discovery, tvb(4, 4))
        t:add_le(FE.nonce, tvb(8, 8))
        info = string.format("%s nonce=0x%s", info, tvb(8, 8):le_uint64():tohex())
    elseif plen > 0 then
        t:add(FE.payload, tvb(4, plen))
        info = string.format("%s %d bytes", info, plen)
    end
    if has_crc then
        local item = t:add_le(FE.crc, tvb(4 + plen, CRC_LEN))
        if crc32c(tvb, 0, 4 + plen) == tvb(4 + plen, CRC_LEN):le_uint() then
            item:append_text(" [correct]")
        else
            item:add_proto_expert_info(E.eth_crc)
        end
    end
    t:set_len(need_len)
    set_info(pinfo, info)
    return need_len
end

------------------------------------------------------------------------------------------------
-- Registration.

lowlat:register_heuristic("udp", heur_udp)
lowlat:register_heuristic("tcp", heur_tcp)
DissectorTable.get("udp.port"):add_for_decode_as(lowlat)
DissectorTable.get("tcp.port"):add_for_decode_as(lowlat_tcp)
DissectorTable.get("ethertype"):add(ETHERTYPE, lowlat_eth)

-- For generated files and other scripts: the version of this dissector's interface to them.
_G.lowlat_dissector = { version = VERSION }
