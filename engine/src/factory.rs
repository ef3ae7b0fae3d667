//! How ctxbench builds the reference engine: the [`SutFactory`] the binary hands to the
//! runner, like `--sut exec:…` hands it an external runtime.

use ctxbench_sut::{Declaration, EngineError, SutFactory, SutSetup, SystemUnderTest, Variant};

use crate::mutants::Mutation;
use crate::reference::{EngineConfig, ReferenceEngine};

/// Builds one [`ReferenceEngine`] per trial; its variants are the [`Mutation`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReferenceFactory;

impl SutFactory for ReferenceFactory {
    fn name(&self) -> &str {
        "reference"
    }

    fn declaration(&self) -> Declaration {
        crate::markup::declaration()
    }

    fn create(&self, setup: SutSetup) -> Result<Box<dyn SystemUnderTest>, EngineError> {
        let mutation = match setup.variant.as_deref() {
            None => None,
            Some(name) => Some(Mutation::from_name(name).ok_or_else(|| {
                EngineError::Unsupported(format!("the reference engine has no variant `{name}`"))
            })?),
        };
        let config = EngineConfig {
            mode: setup.mode,
            model: setup.model,
            context: setup.context,
            tools: setup.tools,
            instructions_path: setup.instructions_path,
            session_dir: setup.session_dir,
            redact: setup.redact,
            faults: setup.faults,
            mutation,
        };
        Ok(Box::new(ReferenceEngine::create(config)?))
    }

    fn variants(&self) -> Vec<Variant> {
        Mutation::ALL
            .iter()
            .map(|m| Variant {
                name: m.as_str().to_string(),
                intended: m.intended_graders().iter().map(|g| g.to_string()).collect(),
                description: m.description().to_string(),
            })
            .collect()
    }
}
