//! The attribute macros of `sluice-sdk`: `#[partitioner]`, `#[filter]`,
//! `#[transform]`, `#[validator]`.
//!
//! # Layout
//! Each macro checks the shape of the function it is put on (a wrong shape
//! is a compile error spanned on the function that shows the expected
//! signature), leaves the function untouched so it stays callable from
//! native tests, and adds a hidden module that
//! 1. runs `wit_bindgen::generate!` on the WIT contract (embedded from
//!    `wit/sluice-plugin.wit` at macro build time) for the kind's world,
//! 2. implements the generated `Guest` trait by viewing the columnar batch
//!    and calling the function once per record (`sluice_sdk::__private`),
//! 3. exports it.
//!
//! A function is either stateless, `fn(record, ..)`, or stateful,
//! `fn(state: &mut S, record, ..)` with `S: sluice_sdk::Init` built by the
//! plugin's `init` call from its parameters.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, Type, parse_macro_input};

/// The contract, embedded so the plugin crate needs no path to it.
const WIT: &str = include_str!("../../../wit/sluice-plugin.wit");

/// One plugin kind: its world, its generated export module, and the shape
/// of the user's function.
struct Kind {
    name: &'static str,
    world: &'static str,
    api: &'static str,
    /// Arguments after the optional state.
    args: usize,
    /// The expected signatures, for error messages.
    expected: &'static str,
}

const PARTITIONER: Kind = Kind {
    name: "partitioner",
    world: "partitioner",
    api: "partitioner_api",
    args: 2,
    expected: "fn(record: &Record<'_>, partition_count: u32) -> u32\n\
        or, with state built from the plugin's parameters:\n\
        fn(state: &mut S, record: &Record<'_>, partition_count: u32) -> u32   (S: sluice_sdk::Init)",
};

const FILTER: Kind = Kind {
    name: "filter",
    world: "filter",
    api: "filter_api",
    args: 1,
    expected: "fn(record: &Record<'_>) -> bool\n\
        or, with state built from the plugin's parameters:\n\
        fn(state: &mut S, record: &Record<'_>) -> bool   (S: sluice_sdk::Init)",
};

const TRANSFORM: Kind = Kind {
    name: "transform",
    world: "transform",
    api: "transform_api",
    args: 2,
    expected: "fn(record: &Record<'_>, out: &mut Output)\n\
        or, with state built from the plugin's parameters:\n\
        fn(state: &mut S, record: &Record<'_>, out: &mut Output)   (S: sluice_sdk::Init)",
};

const VALIDATOR: Kind = Kind {
    name: "validator",
    world: "validator",
    api: "validator_api",
    args: 1,
    expected: "fn(record: &Record<'_>) -> Result<(), String>\n\
        or, with state built from the plugin's parameters:\n\
        fn(state: &mut S, record: &Record<'_>) -> Result<(), String>   (S: sluice_sdk::Init)",
};

/// Make a partitioner plugin of a function
/// `fn(record: &Record<'_>, partition_count: u32) -> u32`, or
/// `fn(state: &mut S, record: &Record<'_>, partition_count: u32) -> u32`.
#[proc_macro_attribute]
pub fn partitioner(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(&PARTITIONER, attr, item)
}

/// Make a filter plugin of a function `fn(record: &Record<'_>) -> bool`, or
/// `fn(state: &mut S, record: &Record<'_>) -> bool`.
#[proc_macro_attribute]
pub fn filter(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(&FILTER, attr, item)
}

/// Make a transform plugin of a function
/// `fn(record: &Record<'_>, out: &mut Output)`, or
/// `fn(state: &mut S, record: &Record<'_>, out: &mut Output)`.
#[proc_macro_attribute]
pub fn transform(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(&TRANSFORM, attr, item)
}

/// Make a validator plugin (produce time) of a function
/// `fn(record: &Record<'_>) -> Result<(), String>`, or
/// `fn(state: &mut S, record: &Record<'_>) -> Result<(), String>`: `Err(reason)` refuses
/// the record, and with it the whole batch.
#[proc_macro_attribute]
pub fn validator(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(&VALIDATOR, attr, item)
}

fn expand(kind: &Kind, attr: TokenStream, item: TokenStream) -> TokenStream {
    let function = parse_macro_input!(item as ItemFn);
    if !attr.is_empty() {
        let attr = TokenStream2::from(attr);
        let error = syn::Error::new(attr.span(), format!("#[{}] takes no arguments", kind.name))
            .to_compile_error();
        return quote!(#function #error).into();
    }
    match check_shape(kind, &function) {
        Ok(state) => {
            let glue = glue(kind, &function, state.as_ref());
            quote!(#function #glue).into()
        }
        Err(error) => {
            let error = error.to_compile_error();
            quote!(#function #error).into()
        }
    }
}

/// Check what the compiler would not explain well (arity, async, generics,
/// receivers); return the state type of a stateful function. Argument and
/// return types are checked by the compiler against the expected function
/// pointer type, spanned on the signature (see [`glue`]).
fn check_shape(kind: &Kind, function: &ItemFn) -> syn::Result<Option<Type>> {
    let sig = &function.sig;
    let wrong = |span: Span, what: &str| {
        syn::Error::new(
            span,
            format!(
                "{what}\nexpected a #[{}] function like:\n{}",
                kind.name, kind.expected
            ),
        )
    };
    if let Some(asyncness) = sig.asyncness {
        return Err(wrong(asyncness.span(), "a plugin function cannot be async"));
    }
    if !sig.generics.params.is_empty() {
        return Err(wrong(
            sig.generics.span(),
            "a plugin function cannot be generic",
        ));
    }
    if let Some(receiver) = sig.receiver() {
        return Err(wrong(
            receiver.span(),
            "a plugin function is a free function, without self",
        ));
    }
    let count = sig.inputs.len();
    if count == kind.args {
        return Ok(None);
    }
    if count != kind.args + 1 {
        let what = format!(
            "this function takes {count} arguments, a {} takes {} or {}",
            kind.name,
            kind.args,
            kind.args + 1
        );
        return Err(wrong(sig.inputs.span(), &what));
    }
    match sig.inputs.first() {
        Some(FnArg::Typed(arg)) => match &*arg.ty {
            Type::Reference(r) if r.mutability.is_some() => Ok(Some((*r.elem).clone())),
            other => Err(wrong(other.span(), "the state argument must be `&mut S`")),
        },
        _ => Err(wrong(sig.inputs.span(), "unexpected receiver")),
    }
}

/// The hidden module: bindings, the `Guest` impl, the export.
fn glue(kind: &Kind, function: &ItemFn, state: Option<&Type>) -> TokenStream2 {
    let name = &function.sig.ident;
    let world = kind.world;
    let api = format_ident!("{}", kind.api);
    let state_type = state.map_or_else(|| quote!(()), |s| quote!(#s));
    let (check, call) = check_and_call(
        kind,
        name,
        &state_type,
        state.is_some(),
        function.sig.span(),
    );
    let methods = guest_methods(kind, &call);
    quote! {
        #[doc(hidden)]
        #[allow(unused_imports, unsafe_code, clippy::all, clippy::pedantic, missing_debug_implementations, unsafe_op_in_unsafe_fn)]
        mod __sluice_plugin {
            use super::*;

            ::sluice_sdk::wit_bindgen::generate!({
                inline: #WIT,
                world: #world,
                runtime_path: "::sluice_sdk::wit_bindgen::rt",
            });

            use self::sluice::plugin::types::{Param, PluginError, RecordBatch};

            #check

            ::std::thread_local! {
                static STATE: ::std::cell::RefCell<::std::option::Option<#state_type>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }

            fn columns(b: &RecordBatch) -> ::sluice_sdk::Columns<'_> {
                ::sluice_sdk::__private::columns!(*b)
            }

            fn error(e: ::sluice_sdk::Error) -> PluginError {
                match e.kind {
                    ::sluice_sdk::ErrorKind::InvalidParams => PluginError::InvalidParams(e.message),
                    ::sluice_sdk::ErrorKind::Failed => PluginError::Failed(e.message),
                }
            }

            struct Plugin;

            impl self::exports::sluice::plugin::#api::Guest for Plugin {
                fn init(params: ::std::vec::Vec<Param>) -> ::std::result::Result<(), PluginError> {
                    ::sluice_sdk::__private::init(&STATE, params.into_iter().map(|p| (p.key, p.value)))
                        .map_err(error)
                }

                #methods
            }

            // Exported symbols named `sluice:plugin/...` only link on wasm;
            // natively the glue is type-checked and left out.
            #[cfg(target_arch = "wasm32")]
            export!(Plugin);
        }
    }
}

/// A spanned coercion of the user's function to the expected function
/// pointer type (the compiler's "expected fn pointer ..., found ..." shows
/// the right signature), and the closure that calls it per record.
fn check_and_call(
    kind: &Kind,
    name: &syn::Ident,
    state_type: &TokenStream2,
    stateful: bool,
    span: Span,
) -> (TokenStream2, TokenStream2) {
    let (args, ret, call_args) = match kind.name {
        "partitioner" => (
            quote!(&::sluice_sdk::Record<'_>, u32),
            quote!(-> u32),
            quote!(r, n),
        ),
        "filter" => (
            quote!(&::sluice_sdk::Record<'_>),
            quote!(-> bool),
            quote!(r),
        ),
        "validator" => (
            quote!(&::sluice_sdk::Record<'_>),
            quote!(-> ::std::result::Result<(), ::std::string::String>),
            quote!(r),
        ),
        _ => (
            quote!(&::sluice_sdk::Record<'_>, &mut ::sluice_sdk::Output),
            quote!(),
            quote!(r, o),
        ),
    };
    let params = match kind.name {
        "partitioner" => quote!(r: &::sluice_sdk::Record<'_>, n: u32),
        "filter" | "validator" => quote!(r: &::sluice_sdk::Record<'_>),
        _ => quote!(r: &::sluice_sdk::Record<'_>, o: &mut ::sluice_sdk::Output),
    };
    if stateful {
        let check = quote_spanned! {span=>
            const USER_FN: fn(&mut #state_type, #args) #ret = super::#name;
            const _: fn() = || {
                fn state_must_implement_init<S: ::sluice_sdk::Init>() {}
                state_must_implement_init::<#state_type>();
            };
        };
        (
            check,
            quote!(|s: &mut #state_type, #params| USER_FN(s, #call_args)),
        )
    } else {
        let check = quote_spanned! {span=> const USER_FN: fn(#args) #ret = super::#name; };
        (check, quote!(|_: &mut (), #params| USER_FN(#call_args)))
    }
}

fn guest_methods(kind: &Kind, call: &TokenStream2) -> TokenStream2 {
    match kind.name {
        "partitioner" => quote! {
            fn partition(batch: RecordBatch, partition_count: u32)
                -> ::std::result::Result<::std::vec::Vec<u32>, PluginError> {
                ::sluice_sdk::__private::partition(&STATE, columns(&batch), partition_count, #call).map_err(error)
            }
        },
        "filter" => quote! {
            fn filter(batch: RecordBatch) -> ::std::result::Result<::std::vec::Vec<u8>, PluginError> {
                ::sluice_sdk::__private::filter(&STATE, columns(&batch), #call).map_err(error)
            }
        },
        "validator" => quote! {
            fn validate(batch: RecordBatch)
                -> ::std::result::Result<::std::vec::Vec<self::exports::sluice::plugin::validator_api::Rejection>, PluginError> {
                let refused = ::sluice_sdk::__private::validate(&STATE, columns(&batch), #call).map_err(error)?;
                ::std::result::Result::Ok(refused
                    .into_iter()
                    .map(|(index, reason)| self::exports::sluice::plugin::validator_api::Rejection { index, reason })
                    .collect())
            }
        },
        _ => quote! {
            fn transform(batch: RecordBatch) -> ::std::result::Result<RecordBatch, PluginError> {
                let b = ::sluice_sdk::__private::transform(&STATE, columns(&batch), #call).map_err(error)?;
                ::std::result::Result::Ok(RecordBatch {
                    offsets: b.offsets,
                    timestamps: b.timestamps,
                    key_bytes: b.key_bytes,
                    key_ends: b.key_ends,
                    key_nulls: b.key_nulls,
                    value_bytes: b.value_bytes,
                    value_ends: b.value_ends,
                    value_nulls: b.value_nulls,
                    header_counts: b.header_counts,
                    header_bytes: b.header_bytes,
                    header_ends: b.header_ends,
                })
            }
        },
    }
}
