#!/usr/bin/env python3
"""Generates apiserver/src/protobuf/schema.rs: the protobuf field tables of the built-in kinds.

Kubernetes' `go-to-protobuf` derives each kind's `generated.proto` from the Go API types, and
the JSON form from the same types' `json` tags. This script reads those Go types, whose struct
tags carry both (`json:"replicas,omitempty" protobuf:"varint,1,opt,name=replicas"`) and whose
Go type says whether a zero value is kept (a pointer) or dropped (`omitempty`), and writes one
static table per message reachable from the served kinds.

Usage (checkouts of the Kubernetes 1.33 staging repositories, e.g. tag v0.33.x of each):

    python3 apiserver/tools/protobuf_schema.py K8S_API APIMACHINERY APIEXTENSIONS \
        > apiserver/src/protobuf/schema.rs && rustfmt --edition 2024 apiserver/src/protobuf/schema.rs
"""

import os
import re
import sys

API, MACHINERY, APIEXT = sys.argv[1:4]

# Go package import path -> (short id, directory, Rust prefix)
PACKAGES = {
    "k8s.io/api/core/v1": ("core/v1", f"{API}/core/v1"),
    "k8s.io/api/apps/v1": ("apps/v1", f"{API}/apps/v1"),
    "k8s.io/api/batch/v1": ("batch/v1", f"{API}/batch/v1"),
    "k8s.io/api/coordination/v1": ("coordination/v1", f"{API}/coordination/v1"),
    "k8s.io/api/events/v1": ("events/v1", f"{API}/events/v1"),
    "k8s.io/api/discovery/v1": ("discovery/v1", f"{API}/discovery/v1"),
    "k8s.io/api/policy/v1": ("policy/v1", f"{API}/policy/v1"),
    "k8s.io/api/autoscaling/v1": ("autoscaling/v1", f"{API}/autoscaling/v1"),
    "k8s.io/api/autoscaling/v2": ("autoscaling/v2", f"{API}/autoscaling/v2"),
    "k8s.io/api/rbac/v1": ("rbac/v1", f"{API}/rbac/v1"),
    "k8s.io/api/authorization/v1": ("authorization/v1", f"{API}/authorization/v1"),
    "k8s.io/api/authentication/v1": ("authentication/v1", f"{API}/authentication/v1"),
    "k8s.io/api/certificates/v1": ("certificates/v1", f"{API}/certificates/v1"),
    "k8s.io/apimachinery/pkg/apis/meta/v1": ("meta/v1", f"{MACHINERY}/pkg/apis/meta/v1"),
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1": (
        "apiextensions/v1",
        f"{APIEXT}/pkg/apis/apiextensions/v1",
    ),
    "k8s.io/apimachinery/pkg/api/resource": ("resource", None),
    "k8s.io/apimachinery/pkg/util/intstr": ("intstr", None),
    "k8s.io/apimachinery/pkg/runtime": ("runtime", None),
    "k8s.io/apimachinery/pkg/types": ("types", None),
}

# The kinds the server reads (apiserver/src/registry.rs, and the subresources' kinds):
# group/version, the package of its types, kinds.
GROUP_VERSIONS = [
    ("v1", "core/v1", ["Namespace", "Pod", "Node", "Event", "ConfigMap", "Secret", "Service",
                       "Endpoints", "ServiceAccount", "Binding"]),
    ("apps/v1", "apps/v1", ["Deployment", "ReplicaSet", "DaemonSet", "StatefulSet"]),
    ("batch/v1", "batch/v1", ["Job", "CronJob"]),
    ("coordination.k8s.io/v1", "coordination/v1", ["Lease"]),
    ("events.k8s.io/v1", "events/v1", ["Event"]),
    ("discovery.k8s.io/v1", "discovery/v1", ["EndpointSlice"]),
    ("rbac.authorization.k8s.io/v1", "rbac/v1",
     ["ClusterRoleBinding", "ClusterRole", "RoleBinding", "Role"]),
    ("authorization.k8s.io/v1", "authorization/v1",
     ["SelfSubjectAccessReview", "SubjectAccessReview", "LocalSubjectAccessReview",
      "SelfSubjectRulesReview"]),
    ("authentication.k8s.io/v1", "authentication/v1",
     ["SelfSubjectReview", "TokenReview", "TokenRequest"]),
    ("certificates.k8s.io/v1", "certificates/v1", ["CertificateSigningRequest"]),
    ("policy/v1", "policy/v1", ["Eviction"]),
    ("autoscaling/v1", "autoscaling/v1", ["Scale", "HorizontalPodAutoscaler"]),
    ("autoscaling/v2", "autoscaling/v2", ["HorizontalPodAutoscaler"]),
    ("apiextensions.k8s.io/v1", "apiextensions/v1", ["CustomResourceDefinition"]),
]
# meta/v1 kinds every group/version also decodes (`metav1.AddToGroupVersion`).
META_KINDS = [
    "DeleteOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
    "GetOptions",
    "ListOptions",
    "Status",
]

# Types with their own protobuf and JSON forms (custom marshallers), decoded by hand.
SPECIAL = {
    ("meta/v1", "Time"): "Ty::Time",
    ("meta/v1", "MicroTime"): "Ty::MicroTime",
    ("meta/v1", "FieldsV1"): "Ty::RawJson",
    ("resource", "Quantity"): "Ty::Quantity",
    ("intstr", "IntOrString"): "Ty::IntOrString",
    ("runtime", "RawExtension"): "Ty::RawJson",
    ("apiextensions/v1", "JSON"): "Ty::RawJson",
    # `type ExtraValue []string`: a message of repeated strings, an array in JSON.
    ("authorization/v1", "ExtraValue"): "Ty::StringList",
    ("authentication/v1", "ExtraValue"): "Ty::StringList",
    ("certificates/v1", "ExtraValue"): "Ty::StringList",
}
UNIONS = {
    ("apiextensions/v1", "JSONSchemaPropsOrArray"): "Union::Array",
    ("apiextensions/v1", "JSONSchemaPropsOrBool"): "Union::Bool",
    ("apiextensions/v1", "JSONSchemaPropsOrStringArray"): "Union::StringArray",
}
# Named basic types of packages not parsed here.
EXTERNAL_BASIC = {("types", "UID"): "string", ("types", "NodeName"): "string"}

# Go basic types. The wire type follows the Go type, as `go-to-protobuf` makes it: a few
# struct tags disagree (PodLogOptions.stream says `varint` for a `*string`).
BASIC = {
    "string": "Ty::Str",
    "int32": "Ty::Int32",
    "int64": "Ty::Int64",
    "int": "Ty::Int64",
    "bool": "Ty::Bool",
    "float64": "Ty::Double",
    "[]byte": "Ty::Bytes",
}

structs = {}  # (pkg, name) -> list of fields
named = {}  # (pkg, name) -> Go type expression (non-struct type declarations)
imports_of = {}  # (pkg, name) -> alias -> pkg id

FIELD = re.compile(r"^\s*(?:(\w+)\s+)?(\S+)\s+`([^`]*)`")


def parse_package(pkg, directory):
    for fname in sorted(os.listdir(directory)):
        if not fname.endswith(".go") or fname.endswith("_test.go"):
            continue
        if fname.startswith("zz_") or "generated" in fname:
            continue
        text = open(os.path.join(directory, fname), encoding="utf-8").read()
        aliases = {}
        for m in re.finditer(r'^\s*(?:(\w+)\s+)?"(k8s\.io/[^"]+)"', text, re.M):
            path = m.group(2)
            if path in PACKAGES:
                aliases[m.group(1) or path.rsplit("/", 1)[1]] = PACKAGES[path][0]
        lines = [re.sub(r"//.*$", "", l) for l in text.split("\n")]
        i = 0
        while i < len(lines):
            line = lines[i]
            m = re.match(r"^type (\w+) struct\s*\{\s*\}\s*$", line)
            if m:
                structs[(pkg, m.group(1))] = []
                imports_of[(pkg, m.group(1))] = aliases
                i += 1
                continue
            m = re.match(r"^type (\w+) struct \{\s*$", line)
            if m:
                name = m.group(1)
                fields = []
                i += 1
                while not lines[i].startswith("}"):
                    fm = FIELD.match(lines[i])
                    if fm:
                        fields.append((fm.group(1), fm.group(2), fm.group(3)))
                    i += 1
                structs[(pkg, name)] = fields
                imports_of[(pkg, name)] = aliases
            else:
                m = re.match(r"^type (\w+) (\S+)\s*$", line)
                if m and m.group(2) != "struct":
                    named[(pkg, m.group(1))] = m.group(2)
                    imports_of[(pkg, m.group(1))] = aliases
            i += 1


for path, (pkg, directory) in PACKAGES.items():
    if directory:
        parse_package(pkg, directory)


def tag(tags, key):
    m = re.search(key + r':"([^"]*)"', tags)
    return m.group(1) if m else None


def qualify(pkg, aliases, name):
    """(package, type name) of a Go type name as written in package `pkg`."""
    if "." in name:
        alias, name = name.split(".", 1)
        if alias not in aliases:
            raise SystemExit(f"unknown package alias {alias} in {pkg}")
        return aliases[alias], name
    return pkg, name


messages = {}  # (pkg, name) -> rust static name, in discovery order
order = []


def static_name(key):
    pkg, name = key
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).upper()
    return pkg.replace("/", "_").replace(".", "_").upper() + "_" + snake


def message_ref(key):
    if key not in messages:
        if key not in structs:
            raise SystemExit(f"no struct {key}")
        messages[key] = static_name(key)
        order.append(key)
    return messages[key]


def resolve(pkg, aliases, goty):
    """The Rust `Ty` of a (non-repeated) Go type."""
    if goty in BASIC:
        return BASIC[goty]
    if goty.startswith("map["):
        m = re.match(r"^map\[([\w.]+)\](.+)$", goty)
        return f"Ty::Map(&{resolve(pkg, aliases, m.group(2))})"
    key = qualify(pkg, aliases, goty)
    if key in SPECIAL:
        return SPECIAL[key]
    if key in UNIONS:
        return f"Ty::Union(&{message_ref(key)}, {UNIONS[key]})"
    if key in EXTERNAL_BASIC:
        return BASIC[EXTERNAL_BASIC[key]]
    if key in named:
        inner = named[key]
        return resolve(key[0], imports_of[key], inner)
    if key in structs:
        return f"Ty::Msg(&{message_ref(key)})"
    raise SystemExit(f"cannot resolve {goty} in {pkg}")


def fields_of(key):
    out = []
    aliases = imports_of[key]
    for name, goty, tags in structs[key]:
        pb = tag(tags, "protobuf")
        if not pb or pb == "-":
            continue
        parts = pb.split(",")
        num, label = int(parts[1]), parts[2]
        gofield = name or goty.lstrip("*").rsplit(".", 1)[-1]
        pbname = next(
            (p[5:] for p in parts if p.startswith("name=")), gofield[0].lower() + gofield[1:]
        )
        js = tag(tags, "json")
        jname, *jopts = (js or "").split(",")
        inline = "inline" in jopts
        if not jname or jname == "-":
            jname = pbname
        pointer = goty.startswith("*")
        goty = goty.lstrip("*")
        repeated = False
        if goty.startswith("[]") and goty != "[]byte":
            repeated = True
            goty = goty[2:].lstrip("*")
        if goty.startswith("map["):
            # A map is repeated key/value entries on the wire; a few tags (discovery/v1
            # `Endpoint.deprecatedTopology`) still say `opt` for one.
            if label not in ("rep", "opt"):
                raise SystemExit(f"map not rep: {key} {name}")
        else:
            resolved_key = None if goty in BASIC else qualify(key[0], aliases, goty)
            if resolved_key in named and named[resolved_key].startswith("[]") and \
                    named[resolved_key] != "[]byte" and label == "rep":
                # A named slice type (`type X []T`) field: repeated T.
                repeated = True
                inner = named[resolved_key][2:]
                aliases2 = imports_of[resolved_key]
                ty = resolve(resolved_key[0], aliases2, inner)
                out.append((num, jname, ty, repeated, pointer or "omitempty" not in jopts, inline))
                continue
        ty = resolve(key[0], aliases, goty)
        keep_zero = pointer or ("omitempty" not in jopts and not inline)
        out.append((num, jname, ty, repeated, keep_zero, inline))
    return out


kinds = []
for api_version, pkg, names in GROUP_VERSIONS:
    for name in names:
        kinds.append((api_version, name, message_ref((pkg, name))))
for name in META_KINDS:
    kinds.append(("*", name, message_ref(("meta/v1", name))))

bodies = []
i = 0
while i < len(order):
    key = order[i]
    bodies.append((key, fields_of(key)))
    i += 1

print("//! The protobuf field tables of the built-in kinds: GENERATED by")
print("//! `apiserver/tools/protobuf_schema.py` from the Go API types of Kubernetes 1.33")
print("//! (`k8s.io/api`, `k8s.io/apimachinery`, `k8s.io/apiextensions-apiserver` v0.33); do not edit.")
print("//!")
print("//! One static [`Message`] per Go struct: each field's tag number, JSON name, type and flags")
print("//! (repeated, zero kept, inlined), as `go-to-protobuf` and the `json` tags define them.")
print()
print("#![allow(clippy::all)]")
print()
print("use super::walk::{Field, Message, Ty, Union, KEEP_ZERO, INLINE, REPEATED};")
print()
print("/// Every decodable kind: apiVersion (`*` for any served one), kind, message.")
print("pub(super) static KINDS: &[(&str, &str, &Message)] = &[")
for api_version, name, ref in kinds:
    print(f'    ("{api_version}", "{name}", &{ref}),')
print("];")
for key, fields in bodies:
    print()
    print(f"static {messages[key]}: Message = Message {{")
    print(f'    name: "{key[1]}",')
    print("    fields: &[")
    for num, jname, ty, repeated, keep_zero, inline in fields:
        flags = []
        if repeated:
            flags.append("REPEATED")
        if keep_zero:
            flags.append("KEEP_ZERO")
        if inline:
            flags.append("INLINE")
        flag = " | ".join(flags) or "0"
        print(f'        Field::new({num}, "{jname}", {ty}, {flag}),')
    print("    ],")
    print("};")
